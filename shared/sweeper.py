"""A periodic sweep: one idempotent clean-up run every `every_seconds` by each replica (a
worker for `shared.connections.running`). A failed run is logged and tried at the next tick."""

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

from shared.clock import Clock

log = logging.getLogger(__name__)

# How often a retention sweep looks for what is past it (hourly: it deletes what is 90 days old).
RETENTION_SWEEP_SECONDS = 3600.0


class PeriodicSweep:
    def __init__(
        self, name: str, sweep: Callable[[], Awaitable[int]], every_seconds: float, done: str
    ):
        """`sweep()` answers how many things it cleaned; `done` is the log line's format for
        a count above zero ("deleted %d expired things")."""
        self._name = name
        self._sweep = sweep
        self._every = every_seconds
        self._done = done
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._stopping.clear()
        self._task = asyncio.create_task(self._run(), name=self._name)

    async def stop(self) -> None:
        self._stopping.set()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                if cleaned := await self._sweep():
                    log.info(self._done, cleaned)
            except Exception as exc:
                log.warning("%s: not done this time: %s", self._name, exc)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self._every)


def retention_sweep(
    name: str,
    purge: Callable[[datetime], Awaitable[int]],
    clock: Clock,
    days: float,
    every_seconds: float,
    done: str,
) -> PeriodicSweep:
    """A sweep deleting what `purge(before)` deletes, `before` being `days` ago."""
    kept = timedelta(days=days)

    async def sweep() -> int:
        return await purge(clock.now() - kept)

    return PeriodicSweep(name, sweep, every_seconds, done)
