"""The services' MongoDB client asks for journaled writes, so a store crash (kill -9) loses
nothing it acknowledged; the URL may decide otherwise. It reports every command it sends, with
the origin of the task that sent it, once the process opted in; an unordered insert's duplicates
are told from its other failures."""

import asyncio
import itertools
import secrets
import time
from pathlib import Path

import pytest
from pymongo.errors import BulkWriteError

from shared.mongo import Origin, count_commands, create_client, duplicates_only, origin, unjournaled
from tessera.processes import Child, base_env, free_port, mongo_argv, wait_tcp

HOST = "127.0.0.1"
# Only bounds a failure (writers that stopped committing): 300 commits take well under it.
COMMITS_DEADLINE_SECONDS = 60


def test_writes_are_journaled_unless_the_url_says_otherwise() -> None:
    assert create_client("mongodb://127.0.0.1:1").write_concern.document == {"j": True}
    relaxed = create_client("mongodb://127.0.0.1:1/?journal=false")
    assert relaxed.write_concern.document == {"j": False}


def test_counters_skip_the_journal_flush_only_under_the_default_write_concern() -> None:
    default = create_client("mongodb://127.0.0.1:1").t.counters
    assert unjournaled(default).write_concern.document == {}
    majority = create_client("mongodb://127.0.0.1:1/?w=majority").t.counters
    assert unjournaled(majority).write_concern.document == majority.write_concern.document


async def test_acknowledged_writes_survive_a_kill_9_of_the_store(tmp_path: Path) -> None:
    port = free_port(HOST)
    store = Child(
        "store", mongo_argv(HOST, port, tmp_path / "data"), base_env(), tmp_path / "store.log"
    )
    url = f"mongodb://{HOST}:{port}/?directConnection=true"
    store.start()
    try:
        wait_tcp(HOST, port, time.monotonic() + 30)
        client = create_client(url)
        for number in range(200):
            await client.t.docs.insert_one({"_id": number})
        store.kill()
        store.wait(10.0)
        await client.close()
        store.start()
        wait_tcp(HOST, port, time.monotonic() + 30)
        client = create_client(url)
        assert await client.t.docs.count_documents({}) == 200
        await client.close()
    finally:
        store.kill()
        store.wait(10.0)


async def test_acknowledged_transactions_survive_a_kill_9_of_the_store(tmp_path: Path) -> None:
    """Every command of the issuer commits a transaction (the pass, its file, its outbox event,
    its processed marker). The embedded store ignored `j: true` on commitTransaction: a kill -9
    lost acknowledged transactions (the fault suite once saw a PATCH answered 200 and gone).
    `tessera up` and the tests start it with --sync-on-commit (tessera/processes.py)."""
    port = free_port(HOST)
    store = Child(
        "store", mongo_argv(HOST, port, tmp_path / "data"), base_env(), tmp_path / "store.log"
    )
    url = f"mongodb://{HOST}:{port}/?directConnection=true"
    store.start()
    acknowledged: list[int] = []
    try:
        wait_tcp(HOST, port, time.monotonic() + 30)
        # Short server selection: the writers cut off by the kill give up at once.
        client = create_client(f"{url}&serverSelectionTimeoutMS=500")
        await client.t.a.insert_one({"_id": -1})

        async def commit_forever(writer: int) -> None:
            for number in itertools.count(writer * 1_000_000):
                async with client.start_session() as session, await session.start_transaction():
                    await client.t.a.insert_one({"_id": number}, session=session)
                    await client.t.b.insert_one({"_id": number}, session=session)
                acknowledged.append(number)

        writers = [asyncio.create_task(commit_forever(n)) for n in range(8)]
        # Commits in flight when the store dies: the loss showed in most such windows.
        async with asyncio.timeout(COMMITS_DEADLINE_SECONDS):
            while len(acknowledged) < 300:  # noqa: ASYNC110  # a count reached, not an event
                await asyncio.sleep(0.01)
        store.kill()
        store.wait(10.0)
        # What had no answer before the kill never counted as acknowledged.
        for task in writers:
            task.cancel()
        await asyncio.gather(*writers, return_exceptions=True)
        await client.close()
        store.start()
        wait_tcp(HOST, port, time.monotonic() + 30)
        client = create_client(url)
        kept_a = {doc["_id"] async for doc in client.t.a.find({}, {"_id": 1})}
        kept_b = {doc["_id"] async for doc in client.t.b.find({}, {"_id": 1})}
        await client.close()
        assert [n for n in acknowledged if n not in kept_a or n not in kept_b] == []
    finally:
        store.kill()
        store.wait(10.0)


async def test_commands_are_counted_with_the_origin_of_the_task_that_sent_them(
    mongo_url: str,
) -> None:
    client = create_client(mongo_url)
    collection = client[f"t_{secrets.token_hex(6)}"].docs
    sent: list[tuple[str, Origin]] = []
    try:
        await collection.insert_one({"_id": 0})  # before opting in: not reported
        count_commands(lambda command, where: sent.append((command, where)))
        await collection.find_one({"_id": 0})
        with origin("consumer"):
            await collection.insert_one({"_id": 1})

            async def elsewhere() -> None:
                with origin("http"):
                    await collection.find_one({"_id": 1})

            await asyncio.create_task(elsewhere())
            await collection.delete_one({"_id": 1})
        assert sent == [
            ("find", "background"),
            ("insert", "consumer"),
            ("find", "http"),
            ("delete", "consumer"),
        ]
    finally:
        count_commands(None)
        await client.drop_database(collection.database.name)
        await client.close()


async def test_an_unordered_insert_tells_duplicates_from_other_failures(mongo_url: str) -> None:
    client = create_client(mongo_url)
    collection = client[f"t_{secrets.token_hex(6)}"].docs
    try:
        await collection.insert_one({"_id": 1})
        with pytest.raises(BulkWriteError) as duplicate:
            await collection.insert_many([{"_id": 0}, {"_id": 1}, {"_id": 2}], ordered=False)
        assert duplicates_only(duplicate.value) == {1}
        assert await collection.count_documents({}) == 3
        other = BulkWriteError({"writeErrors": [{"index": 0, "code": 121}]})
        with pytest.raises(BulkWriteError):
            duplicates_only(other)
    finally:
        await client.drop_database(collection.database.name)
        await client.close()
