"""tessera/index_metadata.py: a write reads its collection's index definitions once, yet every
index stays maintained: one created between two writes, one created by another thread, and an
index a write's own document makes multikey."""

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from secantus.storage import Storage

from tessera.index_metadata import install
from tests.support.store_patches import patched_storage

DB, COLL = "t", "passes"


class Counted(Storage):  # type: ignore[misc]  # SecantusDB is untyped
    """Counts the reads of index definitions from the store's table."""

    reads = 0

    def _iter_indexes(self, db: str, coll: str) -> Iterator[Any]:
        Counted.reads += 1
        yield from super()._iter_indexes(db, coll)


class Patched(Counted):
    """Patched by the fixture, apart from SecantusDB's own class."""


@pytest.fixture
def storage(tmp_path: Path) -> Iterator[Storage]:
    with patched_storage(Patched, install, tmp_path) as store:
        yield store


def _indexed(storage: Storage) -> None:
    for n, field in enumerate(("account_id", "holder_email", "template_id", "short_id")):
        unique = field == "short_id"
        storage.create_index(DB, COLL, f"i{n}", {field: 1}, {"unique": unique, "sparse": unique})


def _refused(storage: Storage, doc: dict[str, Any]) -> bool:
    """Whether the insert was refused for a duplicate key (SecantusDB reports, not raises)."""
    inserted, errors = storage.insert(DB, COLL, [doc])
    return inserted == 0 and [error.get("code") for error in errors] == [11000]


def _found(storage: Storage, query: dict[str, Any]) -> list[Any]:
    return [doc["_id"] for doc in storage.find_matching(DB, COLL, query)]


def test_a_replace_reads_the_index_definitions_once(storage: Storage) -> None:
    _indexed(storage)
    storage.insert(DB, COLL, [{"_id": 1, "account_id": "a", "short_id": "s1"}])
    Counted.reads = 0

    storage.update_matching(DB, COLL, {"_id": 1}, {"account_id": "b", "short_id": "s2"})

    assert Counted.reads == 1  # five as shipped: the indexes, filters, multikey, unique, geo
    assert _found(storage, {"account_id": "b"}) == [1]
    assert _found(storage, {"account_id": "a"}) == []


def test_an_index_created_after_a_write_is_maintained_by_the_next(storage: Storage) -> None:
    _indexed(storage)
    storage.insert(DB, COLL, [{"_id": 1, "account_id": "a", "short_id": "s1"}])
    storage.create_index(DB, COLL, "venue", {"venue": 1}, {"unique": True, "sparse": True})

    storage.insert(DB, COLL, [{"_id": 2, "account_id": "a", "short_id": "s2", "venue": "x"}])

    assert _found(storage, {"venue": "x"}) == [2]
    assert _refused(storage, {"_id": 3, "account_id": "a", "short_id": "s3", "venue": "x"})


def test_an_index_created_by_another_thread_is_maintained(storage: Storage) -> None:
    _indexed(storage)
    made = threading.Thread(
        target=storage.create_index,
        args=(DB, COLL, "venue", {"venue": 1}, {"unique": True, "sparse": True}),
    )
    made.start()
    made.join()

    storage.update_matching(DB, COLL, {"_id": 9}, {"$set": {"venue": "y"}}, upsert=True)

    assert _found(storage, {"venue": "y"}) == [9]
    assert _refused(storage, {"_id": 10, "venue": "y"})


def test_an_index_a_write_makes_multikey_is_known_to_the_writes_after(storage: Storage) -> None:
    _indexed(storage)
    storage.create_index(DB, COLL, "tags", {"tags": 1}, {})
    storage.insert(
        DB,
        COLL,
        [{"_id": 1, "tags": "solo"}, {"_id": 2, "tags": ["vip", "early"]}, {"_id": 3, "tags": "x"}],
    )
    storage.update_matching(DB, COLL, {"_id": 3}, {"$set": {"tags": ["vip", "late"]}})

    assert sorted(_found(storage, {"tags": "vip"})) == [2, 3]
    assert _found(storage, {"tags": "early"}) == [2]
    assert _found(storage, {"tags": "x"}) == []
