"""tessera/journal_flush.py: the store's commits only write their log records, and a command that
asked for `j: true` flushes the log to disk before its reply; one that did not, does not; a kill -9
of the store loses no acknowledged write of either kind."""

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pymongo import MongoClient, WriteConcern

from tessera.journal_flush import wants_journal
from tessera.processes import Child, base_env, free_port, mongo_argv, wait_tcp

HOST = "127.0.0.1"


class Store:
    def __init__(self, tmp_path: Path) -> None:
        self.log = tmp_path / "wiredtiger-calls.log"
        self.port = free_port(HOST)
        probe = [sys.executable, "-m", "tests.support.journal_probe", str(self.log)]
        argv = mongo_argv(HOST, self.port, tmp_path / "data", probe)
        assert "--sync-on-commit" in argv  # as `tessera up` runs it
        self.child = Child("store", argv, base_env(), tmp_path / "store.log")

    def start(self) -> MongoClient:  # type: ignore[type-arg]
        self.child.start()
        wait_tcp(HOST, self.port, time.monotonic() + 30)
        return MongoClient(HOST, self.port, directConnection=True, journal=True)

    def calls(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []

    def kill(self) -> None:
        self.child.kill()
        self.child.wait(10.0)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    store = Store(tmp_path)
    try:
        yield store
    finally:
        store.kill()


def _calls_of(store: Store, action: object) -> list[str]:
    before = len(store.calls())
    assert callable(action)
    action()
    return store.calls()[before:]


def test_a_journaled_write_is_flushed_to_disk_before_its_reply_outside_its_commit(
    store: Store,
) -> None:
    client = store.start()
    docs = client.t.docs
    docs.insert_one({"_id": "warm-up"})  # the collection's creation, apart

    journaled = _calls_of(store, lambda: docs.insert_one({"_id": 1}))
    assert journaled[-1] == "flush sync=on"  # before the reply came
    assert "commit None" in journaled  # the record written, not synced under the lock

    unjournaled = docs.with_options(write_concern=WriteConcern())
    counted = _calls_of(store, lambda: unjournaled.insert_one({"_id": 2}))
    assert "commit None" in counted
    assert not [call for call in counted if call.startswith("flush")]

    def transaction() -> None:
        with client.start_session() as session, session.start_transaction():
            docs.insert_one({"_id": 3}, session=session)

    committed = _calls_of(store, transaction)
    assert committed[-1] == "flush sync=on"
    # A schema change's writes are committed by WiredTiger itself: flushed all the same.
    indexed = _calls_of(store, lambda: docs.create_index("venue"))
    assert indexed[-1] == "flush sync=on", indexed
    assert not [call for call in store.calls() if call == "commit sync=on"]  # never under a lock
    client.close()


def test_acknowledged_writes_of_either_kind_survive_a_kill_9(store: Store) -> None:
    client = store.start()
    docs = client.t.docs
    unjournaled = docs.with_options(write_concern=WriteConcern())
    for number in range(100):
        docs.insert_one({"_id": number})
        unjournaled.insert_one({"_id": f"counter-{number}"})
    client.close()
    store.kill()

    client = store.start()
    assert client.t.docs.count_documents({}) == 200
    client.close()


def test_only_a_write_concern_with_j_true_asks_for_the_journal() -> None:
    assert wants_journal({"insert": "docs", "writeConcern": {"j": True}})
    assert wants_journal({"commitTransaction": 1, "writeConcern": {"w": 1, "j": True}})
    assert not wants_journal({"insert": "docs"})
    assert not wants_journal({"insert": "docs", "writeConcern": {"w": 1}})
    assert not wants_journal({"insert": "docs", "writeConcern": {"j": False}})
