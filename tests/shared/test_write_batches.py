"""Concurrent writes to one collection sent together (shared/write_batches.py), against the
real MongoDB-wire store: many writers cost a few commands, not one each; a taken `_id` answers
False to its own insert alone; a write the store refuses raises for that write alone; a batch
that cannot be sent at all raises for each of its writes."""

import asyncio
from collections.abc import AsyncIterator

import pytest
from pymongo.errors import OperationFailure, PyMongoError

from shared.mongo import Database, MongoClient, create_client
from shared.write_batches import WriteBatches
from tests.support.database import commands_sent, scratch_database

WRITERS = 40


@pytest.fixture
async def db(client: MongoClient) -> AsyncIterator[Database]:
    async with scratch_database(client, ("records",)) as database:
        yield database


async def test_concurrent_writes_go_together_and_each_gets_its_own_answer(db: Database) -> None:
    batches = WriteBatches(db["records"])
    await db["records"].insert_one({"_id": "taken", "n": -1})
    ids = [f"r{n}" for n in range(WRITERS)]
    with commands_sent() as sent:
        inserted = await asyncio.gather(
            *(batches.insert({"_id": i, "n": 0}) for i in [*ids, "taken"])
        )
    assert inserted == [True] * WRITERS + [False]
    # One command for the writes that came while none was in flight, one for those after.
    assert len(sent) <= 2, sent

    with commands_sent() as sent:
        await asyncio.gather(*(batches.update({"_id": i}, {"$inc": {"n": 1}}) for i in ids))
    assert len(sent) <= 2, sent
    counts = {doc["_id"]: doc["n"] async for doc in db["records"].find()}
    assert counts == {**dict.fromkeys(ids, 1), "taken": -1}


async def test_a_refused_write_fails_alone(db: Database) -> None:
    await db.command("collMod", "records", validator={"n": {"$type": "int"}})
    batches = WriteBatches(db["records"])
    results = await asyncio.gather(
        batches.insert({"_id": "good", "n": 1}),
        batches.insert({"_id": "bad", "n": "one"}),
        batches.insert({"_id": "also good", "n": 2}),
        return_exceptions=True,
    )
    assert (results[0], results[2]) == (True, True)
    assert isinstance(results[1], OperationFailure)
    assert await db["records"].count_documents({}) == 2


async def test_a_batch_that_cannot_be_sent_fails_every_write_of_it() -> None:
    unreachable = create_client("mongodb://127.0.0.1:9/?serverSelectionTimeoutMS=300")
    try:
        batches = WriteBatches(unreachable["t"]["records"])
        results = await asyncio.gather(
            *(batches.insert({"_id": n}) for n in range(3)), return_exceptions=True
        )
    finally:
        await unreachable.close()
    assert all(isinstance(result, PyMongoError) for result in results), results
