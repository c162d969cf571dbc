"""Delivery bodies as they are stored now, for attempts that waited for a sending slot.

A claimed delivery carries the body read with its claim, and may then wait minutes behind a
slow endpoint. A redaction meanwhile erases the pass's personal data from the stored body
(docs/privacy.md), so an attempt that waited sends the body as it is stored when it starts,
not the claim's copy. The attempts that wait at the same time share one read: a read is under
way, the ones asked for meanwhile go together in the next (one `find` by ids), so a backlog
costs a round trip per batch, not per attempt.
"""

import asyncio
from collections.abc import Awaitable, Callable, Collection

ReadPayloads = Callable[[Collection[str]], Awaitable[dict[str, str]]]


class FreshPayloads:
    def __init__(self, read: ReadPayloads) -> None:
        self._read = read
        self._asked: dict[str, asyncio.Future[str | None]] = {}
        self._reader: asyncio.Task[None] | None = None

    async def get(self, delivery_id: str) -> str | None:
        """The delivery's stored body (None: the delivery is gone)."""
        asked = self._asked.get(delivery_id)
        if asked is None:
            asked = self._asked[delivery_id] = asyncio.get_running_loop().create_future()
            # Taken even when its caller stopped waiting: no "exception never retrieved".
            asked.add_done_callback(lambda done: done.cancelled() or done.exception())
        if self._reader is None or self._reader.done():
            self._reader = asyncio.create_task(self._read_all())
        return await asyncio.shield(asked)

    async def _read_all(self) -> None:
        while self._asked:
            batch, self._asked = self._asked, {}
            try:
                found = await self._read(batch.keys())
            except Exception as exc:
                for asked in batch.values():
                    asked.set_exception(exc)
                continue
            except BaseException:  # cancelled (stopping): nobody waits forever
                for asked in (*batch.values(), *self._asked.values()):
                    asked.cancel()
                self._asked.clear()
                raise
            for delivery_id, asked in batch.items():
                asked.set_result(found.get(delivery_id))
