"""Waiting for something that happens asynchronously, with a deadline and never a bare sleep."""

import time
from collections.abc import Callable
from typing import Literal, TypeVar

T = TypeVar("T")

POLL_INTERVAL = 0.05


def wait_for(
    predicate: Callable[[], T | Literal[False] | None], timeout: float = 10.0, message: str = ""
) -> T:
    """Call `predicate` until it returns a truthy value and return that value.

    Raises AssertionError once `timeout` seconds have passed without a truthy answer; the
    message names what was awaited and the last value seen.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            what = message or getattr(predicate, "__name__", "condition")
            raise AssertionError(f"timed out after {timeout}s waiting for {what}; last: {value!r}")
        time.sleep(POLL_INTERVAL)
