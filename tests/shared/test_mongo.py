"""The services' MongoDB client asks for journaled writes, so a store crash (kill -9) loses
nothing it acknowledged; the URL may decide otherwise."""

import time
from pathlib import Path

from shared.mongo import create_client, unjournaled
from tessera.processes import Child, base_env, free_port, mongo_argv, wait_tcp

HOST = "127.0.0.1"


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
