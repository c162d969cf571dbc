"""Waiting for something that happens asynchronously: the one polling helper of the tests, with
a deadline and never a bare sleep."""

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal, TypeVar, overload

T = TypeVar("T")

INTERVAL_SECONDS = 0.05
# Only bounds a failure: a test that passes goes on as soon as its condition holds.
TIMEOUT_SECONDS = 20.0


@overload
def poll(
    fetch: Callable[[], T | Literal[False] | None],
    done: None = None,
    timeout: float = TIMEOUT_SECONDS,
    message: str = "",
    interval: float = INTERVAL_SECONDS,
) -> T: ...


@overload
def poll(
    fetch: Callable[[], T],
    done: Callable[[T], object],
    timeout: float = TIMEOUT_SECONDS,
    message: str = "",
    interval: float = INTERVAL_SECONDS,
) -> T: ...


def poll(
    fetch: Callable[[], Any],
    done: Callable[[Any], object] | None = None,
    timeout: float = TIMEOUT_SECONDS,
    message: str = "",
    interval: float = INTERVAL_SECONDS,
) -> Any:
    """Call `fetch` until `done(result)` holds, or without `done` until the result is truthy,
    and return that result.

    Raises AssertionError once `timeout` seconds have passed without it; the message names what
    was awaited and the last result seen.
    """
    deadline = time.monotonic() + timeout
    while True:
        result = fetch()
        if done(result) if done is not None else result:
            return result
        if time.monotonic() >= deadline:
            what = message or getattr(fetch, "__name__", "a condition")
            raise AssertionError(f"timed out after {timeout}s waiting for {what}; last: {result!r}")
        time.sleep(interval)


async def poll_async(
    fetch: Callable[[], Awaitable[T | None]],
    seconds: float = TIMEOUT_SECONDS,
    message: str = "",
    interval: float = INTERVAL_SECONDS,
) -> T:
    """`poll` for a coroutine on the test's event loop (the work awaited runs on it too): await
    `fetch` until its result is truthy, and return it."""
    deadline = time.monotonic() + seconds
    while True:
        result = await fetch()
        if result:
            return result
        if time.monotonic() >= deadline:
            what = message or getattr(fetch, "__name__", "a condition")
            raise AssertionError(f"timed out after {seconds}s waiting for {what}; last: {result!r}")
        await asyncio.sleep(interval)
