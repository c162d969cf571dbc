"""The pure helpers of bench.reads: ids, ratios, explain summaries, document shapes."""

import random
from datetime import UTC, datetime, timedelta

from bench.reads import (
    Latency,
    Seeder,
    id_at,
    latency,
    plan_summary,
    ratio_table,
    ratios,
    shape_problems,
    target_indexes,
)
from shared.ids import has_prefix, new_id


def test_id_at_makes_valid_ids_that_sort_by_time() -> None:
    rng = random.Random(1)
    earlier = datetime(2024, 1, 1, tzinfo=UTC)
    ids = [id_at("pass", earlier + timedelta(milliseconds=n), rng) for n in range(50)]
    assert all(has_prefix(value, "pass") for value in ids)
    assert ids == sorted(ids)
    assert ids[-1] < new_id("pass")


def test_latency_and_ratios() -> None:
    small = {"q": latency([1.0, 2.0, 3.0, 4.0]), "only_small": latency([1.0])}
    large = {"q": latency([2.0, 4.0, 6.0, 8.0])}
    assert small["q"] == Latency(count=4, mean_ms=2.5, p50_ms=2.0, p99_ms=4.0, max_ms=4.0)
    assert ratios(small, large) == {"q": {"p50": 2.0, "p99": 2.0}}
    assert ratios({"q": latency([0.0])}, {"q": latency([1.0])}) == {"q": {"p50": None, "p99": None}}
    table = ratio_table(10, 1000, small, large)
    assert "p50 @1000" in table
    assert "2.00" in table.splitlines()[-1]


def test_plan_summary_reads_the_winning_plan() -> None:
    explained = {
        "queryPlanner": {
            "winningPlan": {
                "stage": "LIMIT",
                "inputStage": {
                    "stage": "FETCH",
                    "inputStage": {"stage": "IXSCAN", "indexName": "account_id_1_mode_1__id_-1"},
                },
            }
        },
        "executionStats": {"nReturned": 51, "totalKeysExamined": 51, "totalDocsExamined": 51},
    }
    summary = plan_summary(explained)
    assert summary["stages"] == ["LIMIT", "FETCH", "IXSCAN"]
    assert summary["scan"] == "IXSCAN"
    assert summary["index"] == "account_id_1_mode_1__id_-1"
    assert summary["blocking_sort"] is False
    assert summary["totalDocsExamined"] == 51
    collscan = plan_summary(
        {"queryPlanner": {"winningPlan": {"stage": "SORT", "inputStage": {"stage": "COLLSCAN"}}}}
    )
    assert collscan["scan"] == "COLLSCAN"
    assert collscan["blocking_sort"] is True
    assert collscan["index"] is None


def test_seeded_documents_have_the_issuer_shape() -> None:
    seeder = Seeder(
        account_id="acct_x",
        mode="test",
        template_id="tmpl_x",
        large=1000,
        start=datetime(2024, 1, 1, tzinfo=UTC),
        targets=target_indexes(100),
    )
    rng = random.Random(3)
    docs = [seeder.document(index, rng) for index in range(100)]
    assert [doc["_id"] for doc in docs] == sorted(doc["_id"] for doc in docs)
    assert sum(doc["holder_email"] == "bench-target@example.com" for doc in docs) == 5
    assert shape_problems(docs[0], docs[1]) == []
    assert shape_problems(docs[0], {**docs[1], "extra": 1}) == ["extra extra"]
    assert shape_problems(docs[0], {**docs[1], "version": "1"}) == ["version: int vs str"]
