"""A periodic sweep: one idempotent clean-up run every `every_seconds` by each replica (a
worker for `shared.connections.running`). A failed run is logged and tried at the next tick."""

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)


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
