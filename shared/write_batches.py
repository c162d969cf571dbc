"""Writes to one collection from concurrent requests, sent together (group commit).

Each caller awaits its own write. The first write finds no batch in flight and goes at once,
alone; the writes that arrive while a batch is in flight wait for it and go together as the
next batch (one unordered `bulk_write`), so nothing waits for a timer, and under load a
replica's writes cost one round trip per batch instead of one each. The store charges mostly
per command (docs/performance.md): the api's idempotency records, two writes per request, are
what this is for (services/api/repository.py).

Each write succeeds or fails on its own: an insert whose `_id` is taken answers False (the
caller reads the record that holds it), any other refusal of one write raises for that write
alone, and a batch that fails as a whole (the store unreachable) raises for each of its writes.
"""

import asyncio
from dataclasses import dataclass
from typing import Any

from pymongo import InsertOne, UpdateOne
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.errors import BulkWriteError, OperationFailure

from shared.mongo import DUPLICATE_KEY, Document

MAX_BATCH = 100


@dataclass
class _Write:
    operation: InsertOne[Document] | UpdateOne
    done: asyncio.Future[bool]


class WriteBatches:
    def __init__(self, collection: AsyncCollection[Document], max_batch: int = MAX_BATCH):
        self._collection = collection
        self._max_batch = max_batch
        self._waiting: list[_Write] = []
        self._sender: asyncio.Task[None] | None = None

    async def insert(self, document: Document) -> bool:
        """Insert `document`; False when its `_id` is taken."""
        return await self._write(InsertOne(document))

    async def update(self, filter: Document, update: dict[str, Any]) -> None:
        """`update_one(filter, update)`, its outcome unreported (as the caller needs)."""
        await self._write(UpdateOne(filter, update))

    async def _write(self, operation: InsertOne[Document] | UpdateOne) -> bool:
        loop = asyncio.get_running_loop()
        write = _Write(operation, loop.create_future())
        # Its outcome is taken even when its caller gave up waiting (no "never retrieved").
        write.done.add_done_callback(lambda done: done.cancelled() or done.exception())
        sender = self._sender
        if sender is not None and sender.get_loop() is not loop:
            # Used from another event loop than before (tests make one per client): what
            # waits from the old one is left to it.
            self._waiting = [w for w in self._waiting if w.done.get_loop() is loop]
            sender = None
        self._waiting.append(write)
        if sender is None or sender.done():
            self._sender = asyncio.create_task(self._send_all())
        # Shielded: a caller that gives up (a client gone) does not cancel the others' batch.
        return await asyncio.shield(write.done)

    async def _send_all(self) -> None:
        batch: list[_Write] = []
        try:
            while self._waiting:
                batch = self._waiting[: self._max_batch]
                del self._waiting[: self._max_batch]
                await self._send(batch)
        except BaseException as exc:  # cancelled (the process stopping): nobody waits forever
            _fail([*batch, *self._waiting], RuntimeError(f"write not sent: {exc!r}"))
            self._waiting.clear()
            raise

    async def _send(self, batch: list[_Write]) -> None:
        refused: dict[int, dict[str, Any]] = {}
        try:
            await self._collection.bulk_write([w.operation for w in batch], ordered=False)
        except BulkWriteError as exc:
            if exc.details.get("writeConcernErrors"):
                _fail(batch, exc)
                return
            refused = {int(error["index"]): error for error in exc.details.get("writeErrors", [])}
        except Exception as exc:  # the batch as a whole: every write of it failed
            _fail(batch, exc)
            return
        for index, write in enumerate(batch):
            if write.done.done():
                continue
            error = refused.get(index)
            if error is None:
                write.done.set_result(True)
            elif error.get("code") == DUPLICATE_KEY and isinstance(write.operation, InsertOne):
                write.done.set_result(False)
            else:
                write.done.set_exception(
                    OperationFailure(error.get("errmsg", "write refused"), error.get("code"))
                )


def _fail(batch: list[_Write], exc: Exception) -> None:
    for write in batch:
        if not write.done.done():
            write.done.set_exception(exc)
