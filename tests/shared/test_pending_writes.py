"""A transaction's kept writes, sent together (shared/pending_writes.py), against the real
MongoDB-wire store: one `bulkWrite` command for writes to several collections, in the order
made, committed or aborted with the transaction; an update that had to match and did not, a
duplicate key and a write conflict each fail the flush as a separate write would have; and the
same writes one command each for a server older than MongoDB 8.0."""

from collections.abc import AsyncIterator, Callable, Iterator

import pytest
from pymongo.errors import OperationFailure, PyMongoError

from services.issuer.repository import is_duplicate
from shared import pending_writes
from shared.mongo import Database, MongoClient, is_write_conflict
from shared.pending_writes import CLIENT_BULK_WRITE_MAX, PendingWrites, supports_client_bulk_write
from tests.support.database import commands_sent, scratch_database


class Mismatch(Exception):
    pass


@pytest.fixture
async def db(client: MongoClient) -> AsyncIterator[Database]:
    async with scratch_database(client, ("passes", "files", "outbox")) as database:
        yield database


@pytest.fixture
def sent() -> Iterator[list[str]]:
    with commands_sent() as names:
        yield names


@pytest.fixture(params=["bulkWrite", "one command each"])
def server(request: pytest.FixtureRequest, client: MongoClient) -> Iterator[str]:
    """Both paths: the store as it is (MongoDB 8.0's wire version), and as a server older
    than 8.0 would be seen."""
    if request.param == "one command each":
        pending_writes._client_bulk_write[client] = False
    try:
        yield str(request.param)
    finally:
        pending_writes._client_bulk_write.pop(client, None)


async def _flushed(client: MongoClient, fill: Callable[[PendingWrites], None]) -> None:
    """A transaction whose writes are those `fill` keeps, flushed then committed."""
    async with client.start_session() as session, await session.start_transaction():
        pending = PendingWrites(client, session)
        fill(pending)
        await pending.flush()


async def test_the_store_takes_the_client_bulk_write(client: MongoClient) -> None:
    assert await supports_client_bulk_write(client)


async def test_writes_to_three_collections_are_one_command_in_order(
    client: MongoClient, db: Database, sent: list[str]
) -> None:
    await supports_client_bulk_write(client)  # asked once per client, before the flush
    async with client.start_session() as session, await session.start_transaction():
        pending = PendingWrites(client, session)
        pending.insert(db.passes, {"_id": "p1", "version": 1})
        pending.replace(db.files, {"_id": "p1"}, {"_id": "p1", "v": 1}, upsert=True)
        # In order: the update meets the pass inserted before it in the same command.
        pending.update(db.passes, {"_id": "p1", "version": 1}, {"$set": {"version": 2}})
        pending.insert(db.outbox, {"_id": "e1"})
        assert len(pending) == 4
        assert await db.passes.find_one({"_id": "p1"}) is None  # kept, not sent yet
        sent.clear()
        await pending.flush()
        assert len(pending) == 0
    assert sent == ["bulkWrite", "commitTransaction"]
    assert await db.passes.find_one({"_id": "p1"}) == {"_id": "p1", "version": 2}
    assert await db.files.find_one({"_id": "p1"}) == {"_id": "p1", "v": 1}
    assert await db.outbox.count_documents({}) == 1


async def test_many_writes_go_as_one_command_per_collection(
    client: MongoClient, db: Database, sent: list[str]
) -> None:
    """A job chunk's hundreds of writes: one insert per collection, as insert_many sends (the
    store takes those faster per document than one bulkWrite of them all)."""
    await supports_client_bulk_write(client)
    rows = CLIENT_BULK_WRITE_MAX
    async with client.start_session() as session, await session.start_transaction():
        pending = PendingWrites(client, session)
        for n in range(rows):
            pending.insert(db.passes, {"_id": f"p{n}", "version": 1})
        for n in range(rows):
            pending.insert(db.outbox, {"_id": f"e{n}"})
        for n in range(rows):
            at_one = {"_id": f"p{n}", "version": 1}
            pending.update(db.passes, at_one, {"$set": {"version": 2}}, must_match=Mismatch)
        sent.clear()
        await pending.flush()
    assert sent == ["insert", "insert", "update", "commitTransaction"]
    assert await db.passes.count_documents({"version": 2}) == rows
    assert await db.outbox.count_documents({}) == rows


async def test_without_bulk_write_each_run_of_writes_is_its_own_command(
    client: MongoClient, db: Database, sent: list[str]
) -> None:
    pending_writes._client_bulk_write[client] = False
    try:
        async with client.start_session() as session, await session.start_transaction():
            pending = PendingWrites(client, session)
            pending.insert(db.passes, {"_id": "p1", "version": 1})
            pending.replace(db.files, {"_id": "p1"}, {"_id": "p1", "v": 1}, upsert=True)
            pending.insert(db.outbox, {"_id": "e1"})
            await pending.flush()
    finally:
        pending_writes._client_bulk_write.pop(client, None)
    assert sent == ["insert", "update", "insert", "commitTransaction"]
    assert await db.outbox.count_documents({}) == 1


async def test_an_update_that_must_match_and_does_not_aborts_everything(
    client: MongoClient, db: Database, server: str
) -> None:
    await db.passes.insert_one({"_id": "p1", "version": 3})

    def fill(pending: PendingWrites) -> None:
        pending.insert(db.outbox, {"_id": "e1"})
        pending.update(
            db.passes,
            {"_id": "p1", "version": 2},  # changed meanwhile: now at 3
            {"$set": {"version": 3, "name": "stale"}},
            must_match=Mismatch,
        )

    with pytest.raises(Mismatch):
        await _flushed(client, fill)
    assert await db.passes.find_one({"_id": "p1"}) == {"_id": "p1", "version": 3}
    assert await db.outbox.count_documents({}) == 0


async def test_an_update_that_must_match_and_does_is_written(
    client: MongoClient, db: Database, server: str
) -> None:
    await db.passes.insert_one({"_id": "p1", "version": 2})
    async with client.start_session() as session, await session.start_transaction():
        pending = PendingWrites(client, session)
        pending.update(
            db.passes, {"_id": "p1", "version": 2}, {"$set": {"version": 3}}, must_match=Mismatch
        )
        await pending.flush()
    assert await db.passes.find_one({"_id": "p1"}) == {"_id": "p1", "version": 3}


async def test_a_duplicate_key_fails_the_flush_as_a_duplicate(
    client: MongoClient, db: Database, server: str
) -> None:
    await db.outbox.insert_one({"_id": "e1"})

    def fill(pending: PendingWrites) -> None:
        pending.insert(db.passes, {"_id": "p1"})
        pending.insert(db.outbox, {"_id": "e1"})

    with pytest.raises(OperationFailure) as failed:
        await _flushed(client, fill)
    assert is_duplicate(failed.value)
    assert not is_write_conflict(failed.value)
    assert await db.passes.count_documents({}) == 0


async def test_a_write_conflict_fails_the_flush_as_one_to_run_again(
    client: MongoClient, db: Database, server: str
) -> None:
    await db.passes.insert_one({"_id": "p1", "n": 0})
    async with client.start_session() as holder, await holder.start_transaction():
        await db.passes.update_one({"_id": "p1"}, {"$inc": {"n": 1}}, session=holder)

        def fill(pending: PendingWrites) -> None:
            pending.update(db.passes, {"_id": "p1"}, {"$inc": {"n": 10}})

        with pytest.raises(PyMongoError) as failed:
            await _flushed(client, fill)
        assert is_write_conflict(failed.value)
        assert not is_duplicate(failed.value)
    assert await db.passes.find_one({"_id": "p1"}) == {"_id": "p1", "n": 1}
