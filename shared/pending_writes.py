"""The writes of one transaction, sent together when it ends: one round trip instead of one
per write.

A transaction of a created pass used to send its writes one command at a time (the pass, its
file, its outbox event, its processed-command marker), each waiting for the last: under load,
every command waits its turn at the store, and the transaction held its locks meanwhile.
`PendingWrites` keeps them and `flush` sends them as one client-level `bulkWrite` (MongoDB
8.0+, one command for writes to several collections), in the order they were added, inside the
transaction's session. On the development store a transaction of four writes sent this way
costs the store 42 % less CPU and commits 1.6 x as fast (docs/performance.md#round-trips).

An update may have to match its document (optimistic locking): the flush then asks for
per-write results and raises the write's own error when it matched none. A
duplicate key or a write conflict raises as a separate write would (`ClientBulkWriteException`,
an `OperationFailure`: `is_write_conflict` and the owners' duplicate checks look into it), and
the whole transaction is aborted as before.

Many writes (a batch's or a job chunk's hundreds) go instead as one command per run of writes
to one collection (the passes, then their files, then the outbox documents...), which the store
takes faster per document than a bulkWrite of as many operations; and so does every flush for
a server older than 8.0 (found out once per client from its `hello`).
"""

import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pymongo import InsertOne, ReplaceOne, UpdateOne
from pymongo.asynchronous.client_session import AsyncClientSession
from pymongo.asynchronous.collection import AsyncCollection

from shared.mongo import Document, MongoClient

# MongoDB 8.0's wire version: the first with the client-level bulkWrite command.
CLIENT_BULK_WRITE_WIRE_VERSION = 25
# Up to this many writes go as one client-level bulkWrite. More (a batch, a job's chunk: tens of
# writes to each of a few collections) go as one command per run of writes to one collection,
# which the store takes faster per document: measured with bench.jobs, a 100-row chunk's 400
# writes as one bulkWrite imported at 354 passes/s against 372 as four inserts.
CLIENT_BULK_WRITE_MAX = 16
_client_bulk_write: "weakref.WeakKeyDictionary[MongoClient, bool]" = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class _Write:
    collection: AsyncCollection[Document]
    kind: type[InsertOne[Document]] | type[ReplaceOne[Document]] | type[UpdateOne]
    # The document of an insert, the filter of a replace or an update.
    target: Mapping[str, Any]
    # The replacement or the update.
    change: Mapping[str, Any] | None = None
    upsert: bool | None = None
    # An update that must match its document, else the flush raises `mismatch()`.
    mismatch: Callable[[], Exception] | None = None

    def model(self, namespace: str | None) -> Any:
        if self.kind is InsertOne:
            return InsertOne(self.target, namespace=namespace)
        if self.kind is ReplaceOne:
            return ReplaceOne(self.target, self.change, upsert=self.upsert, namespace=namespace)
        return UpdateOne(self.target, self.change or {}, namespace=namespace)


async def supports_client_bulk_write(client: MongoClient) -> bool:
    """Whether the server takes `bulkWrite` (MongoDB 8.0+); asked once per client."""
    if client not in _client_bulk_write:
        hello = await client.admin.command("hello")
        wire_version = int(hello.get("maxWireVersion", 0))
        _client_bulk_write[client] = wire_version >= CLIENT_BULK_WRITE_WIRE_VERSION
    return _client_bulk_write[client]


class PendingWrites:
    """Writes kept for one flush, inside `session`'s transaction."""

    def __init__(self, client: MongoClient, session: AsyncClientSession):
        self._client = client
        self._session = session
        self._writes: list[_Write] = []

    def __len__(self) -> int:
        return len(self._writes)

    def insert(self, collection: AsyncCollection[Document], document: Document) -> None:
        self._writes.append(_Write(collection, InsertOne, document))

    def replace(
        self,
        collection: AsyncCollection[Document],
        filter_: Mapping[str, Any],
        document: Document,
        *,
        upsert: bool = False,
    ) -> None:
        self._writes.append(_Write(collection, ReplaceOne, filter_, document, upsert=upsert))

    def update(
        self,
        collection: AsyncCollection[Document],
        filter_: Mapping[str, Any],
        update: Mapping[str, Any],
        *,
        must_match: Callable[[], Exception] | None = None,
    ) -> None:
        """An update; with `must_match`, the flush raises `must_match()` unless it matched."""
        self._writes.append(_Write(collection, UpdateOne, filter_, update, mismatch=must_match))

    async def flush(self) -> None:
        """Send what is kept, in order; nothing is kept after, whatever happened."""
        writes, self._writes = self._writes, []
        if not writes:
            return
        if len(writes) <= CLIENT_BULK_WRITE_MAX and await supports_client_bulk_write(self._client):
            await self._bulk_write(writes)
        else:
            for run in _runs(writes):
                await self._collection_write(run)

    async def _bulk_write(self, writes: list[_Write]) -> None:
        checked = any(write.mismatch is not None for write in writes)
        result = await self._client.bulk_write(
            [write.model(write.collection.full_name) for write in writes],
            session=self._session,
            verbose_results=checked,
        )
        if not checked:
            return
        for index, write in enumerate(writes):
            if write.mismatch is None:
                continue
            outcome = result.update_results.get(index)
            if outcome is None or outcome.matched_count != 1:
                raise write.mismatch()

    async def _collection_write(self, run: list[_Write]) -> None:
        """Writes of one kind to one collection, one after the other: one command (many inserts
        are one `insert`, as insert_many sends)."""
        collection = run[0].collection
        result = await collection.bulk_write(
            [write.model(None) for write in run], ordered=True, session=self._session
        )
        first = run[0]
        if first.mismatch is not None and result.matched_count != len(run):
            raise first.mismatch()


def _runs(writes: list[_Write]) -> list[list[_Write]]:
    """The writes cut into runs of one collection, one kind and one check, in order."""
    runs: list[list[_Write]] = []
    for write in writes:
        last = runs[-1][-1] if runs else None
        same = last is not None and (
            last.collection.full_name == write.collection.full_name
            and last.kind is write.kind
            and (last.mismatch is None) == (write.mismatch is None)
        )
        if same:
            runs[-1].append(write)
        else:
            runs.append([write])
    return runs
