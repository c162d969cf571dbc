"""tessera/index_prefix.py: a filter that pins more of an index than SecantusDB's exact shapes
serve reads only the documents that prefix pins, and every query answers what the store as
shipped answers (random documents and filters, against an unpatched store)."""

import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from secantus.storage import Storage

from tessera.index_prefix import install
from tests.support.store_patches import patched_storage

DB, COLL = "t", "webhook_deliveries"
NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
STATUSES = ("pending", "failed", "delivered", "exhausted")


class Patched(Storage):  # type: ignore[misc]  # SecantusDB is untyped
    """Patched by the fixture, apart from SecantusDB's own class."""


def _indexed(storage: Storage) -> None:
    storage.create_index(DB, COLL, "due", {"status": 1, "next_attempt_at": 1}, {})
    storage.create_index(DB, COLL, "hook", {"webhook_id": 1, "status": 1, "_id": -1}, {})
    storage.create_index(DB, COLL, "manual", {"manual_at": 1}, {"sparse": True})
    storage.create_index(
        DB,
        COLL,
        "tagged",
        {"tag": 1, "n": 1},
        {"partialFilterExpression": {"tag": {"$exists": True}}},
    )


def _documents(count: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    docs = []
    for n in range(count):
        doc: dict[str, Any] = {
            "_id": f"d{n:05d}",
            "webhook_id": f"w{rng.randrange(5)}",
            "status": rng.choice(STATUSES),
            # Most retries are due later (a failing endpoint's backlog).
            "next_attempt_at": NOW + timedelta(seconds=rng.randrange(-200, 1000)),
            "lease_until": rng.choice([None, NOW + timedelta(seconds=30), NOW - timedelta(1)]),
            "n": rng.randrange(10),
        }
        if rng.random() < 0.1:
            doc["status"] = rng.choice([["pending", "failed"], None, 3])  # odd shapes
        if rng.random() < 0.1:
            del doc["next_attempt_at"]
        if rng.random() < 0.2:
            doc["manual_at"] = NOW - timedelta(seconds=rng.randrange(60))
        if rng.random() < 0.3:
            doc["tag"] = rng.choice(["a", "b"])
        docs.append(doc)
    return docs


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[tuple[Storage, Storage]]:
    docs = _documents(600, seed=7)
    shipped = Storage(str(tmp_path / "shipped"), enable_oplog=False)
    try:
        with patched_storage(Patched, install, tmp_path) as patched:
            for store in (shipped, patched):
                _indexed(store)
                store.insert(DB, COLL, [dict(doc) for doc in docs])
            yield shipped, patched
    finally:
        shipped.close()


def _due(skip: list[str]) -> dict[str, Any]:
    """The webhook scheduler's due query (services/webhooks/repository.py `due`)."""
    return {
        "status": {"$in": ["pending", "failed"]},
        "next_attempt_at": {"$lte": NOW},
        "lease_until": {"$not": {"$gte": NOW}},
        "webhook_id": {"$nin": skip},
    }


def _ids(store: Storage, query: dict[str, Any]) -> list[str]:
    return sorted(doc["_id"] for doc in store.find_matching(DB, COLL, query))


def test_the_due_query_reads_only_what_its_index_pins(stores: tuple[Storage, Storage]) -> None:
    shipped, patched = stores
    query = _due(["w1"])
    pinned = {"status": {"$in": ["pending", "failed"]}, "next_attempt_at": {"$lte": NOW}}

    read = patched._try_index_id_keys(DB, COLL, query)
    read_as_shipped = shipped._try_index_id_keys(DB, COLL, query)

    # What the prefix pins, and the pending ones without a time (null sorts before any date).
    timeless = {"status": pinned["status"], "next_attempt_at": None}
    assert len(_ids(shipped, pinned)) <= len(read)
    assert len(read) <= len(_ids(shipped, pinned)) + len(_ids(shipped, timeless))
    assert len(read_as_shipped or _ids(shipped, {})) > 2 * len(read)
    assert _ids(patched, query) == _ids(shipped, query)


def test_a_filter_on_ids_keeps_the_stores_own_point_lookups(
    stores: tuple[Storage, Storage],
) -> None:
    """A chunk's read of many ids within a prefix (`webhook_id` and `status` here, account and
    mode in a rollout): the ids' point lookups, not every document of the prefix."""
    shipped, patched = stores
    ids = [f"d{n:05d}" for n in range(0, 400, 10)]  # more than an $in is expanded for
    query = {"webhook_id": "w1", "status": "delivered", "_id": {"$in": ids}}

    read = patched._try_index_id_keys(DB, COLL, query)

    assert read == shipped._try_index_id_keys(DB, COLL, query)
    assert len(read) <= len(ids)


def _random_filter(rng: random.Random) -> dict[str, Any]:
    clauses: dict[str, Any] = {
        "status": rng.choice(
            [rng.choice(STATUSES), {"$in": rng.sample(STATUSES, rng.randrange(1, 4))}]
        ),
        "next_attempt_at": rng.choice(
            [{"$lte": NOW}, {"$gt": NOW - timedelta(seconds=300), "$lt": NOW}, NOW]
        ),
        "webhook_id": rng.choice([f"w{rng.randrange(5)}", {"$nin": ["w0", "w2"]}]),
        "lease_until": rng.choice([None, {"$not": {"$gte": NOW}}]),
        "manual_at": {"$lte": NOW},
        "tag": rng.choice(["a", {"$exists": True}]),
        "n": rng.choice([rng.randrange(10), {"$gte": 5}, {"$in": [1, 2, 3]}]),
        "_id": {"$gte": "d00300"},
    }
    names = rng.sample(sorted(clauses), rng.randrange(2, 5))
    return {name: clauses[name] for name in names}


def test_every_query_answers_what_the_store_as_shipped_answers(
    stores: tuple[Storage, Storage],
) -> None:
    shipped, patched = stores
    rng = random.Random(11)
    narrowed = 0
    for _ in range(300):
        query = _random_filter(rng)
        assert _ids(patched, query) == _ids(shipped, query), query
        keys = patched._try_index_id_keys(DB, COLL, query)
        narrowed += keys is not None and keys != shipped._try_index_id_keys(DB, COLL, query)
    assert narrowed > 30  # the patch took part, not only the shipped code


def test_writes_through_a_narrowed_filter_change_exactly_the_matches(
    stores: tuple[Storage, Storage],
) -> None:
    shipped, patched = stores
    query = _due([])
    for store in stores:
        store.update_matching(DB, COLL, query, {"$set": {"claimed": True}}, multi=True)
    claimed = {"claimed": True}
    assert _ids(patched, claimed) == _ids(shipped, claimed) == _ids(shipped, query)
    assert _ids(patched, claimed)


def test_a_storage_of_other_internals_is_left_as_it_is() -> None:
    class Other:
        def _try_index_id_keys(self) -> None: ...

    assert not install(Other)
    assert Other._try_index_id_keys.__qualname__.endswith("Other._try_index_id_keys")
