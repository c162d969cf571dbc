"""Attempts' outcomes written in batches against a real MongoDB-wire store: many outcomes
recorded at once go out in a few bulk writes, each answers whether its lease still held, and
only recorded attempts count for their endpoint's health."""

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from services.webhooks.endpoint_health import AttemptResult, EndpointHealth
from services.webhooks.outcomes import OutcomeWriter
from services.webhooks.repository import WebhookRepository
from shared.models import DeliveryRecord
from tests.webhooks.records import delivery, webhook

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
LEASE = timedelta(seconds=60)


class CountingRepository(WebhookRepository):
    """The real repository, counting the outcome writes it is asked for."""

    writes: list[int]

    async def record_attempts(
        self,
        outcomes: list[tuple[str, str, dict[str, Any]]],
        manual: dict[str, datetime] | None = None,
    ) -> set[str]:
        self.writes.append(len(outcomes))
        return await super().record_attempts(outcomes, manual)


def _writer(repo: WebhookRepository) -> tuple[OutcomeWriter, CountingRepository]:
    counting = CountingRepository(repo.webhooks.database)
    counting.writes = []
    health = EndpointHealth(counting, timedelta(days=5))
    return OutcomeWriter(counting, health, lambda: T0), counting


async def _leased(repo: WebhookRepository, token: str, **fields: Any) -> DeliveryRecord:
    record = delivery(lease_until=T0 + LEASE, lease_owner=token, **fields)
    await repo.insert_delivery(record)
    return record


async def _once_failing(repo: WebhookRepository, hook_id: str) -> dict[str, Any]:
    """The webhook once a failing streak is stored for it (polled, with a deadline):
    `failing_since` is the last of the bulk write's updates for a failure."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10.0
    while True:
        stored = await repo.webhooks.find_one({"_id": hook_id})
        assert stored is not None
        if stored.get("failing_since") is not None or loop.time() > deadline:
            return stored
        await asyncio.sleep(0.02)


def _failed(attempts: int = 1) -> dict[str, Any]:
    return {"status": "failed", "attempts": attempts, "response_status": 500}


async def test_outcomes_recorded_at_once_share_a_few_bulk_writes(repo: WebhookRepository) -> None:
    writer, counting = _writer(repo)
    leased = [await _leased(repo, f"r1/{n}") for n in range(50)]
    answers = await asyncio.gather(
        *(
            writer.record(d.id, f"r1/{n}", {"status": "delivered", "attempts": 1})
            for n, d in enumerate(leased)
        )
    )
    assert answers == [True] * 50
    assert sum(counting.writes) == 50
    assert len(counting.writes) <= 2, counting.writes
    stored = [doc async for doc in repo.deliveries.find({})]
    assert {(d["status"], d["attempts"], d["lease_owner"]) for d in stored} == {
        ("delivered", 1, None)
    }


async def test_outcomes_that_arrive_during_a_write_go_in_the_next_one(
    repo: WebhookRepository,
) -> None:
    writer, counting = _writer(repo)
    leased = [await _leased(repo, "r1/1") for _ in range(30)]
    first = asyncio.create_task(writer.record(leased[0].id, "r1/1", _failed()))
    await asyncio.sleep(0)  # the first write is under way, alone
    rest = [writer.record(d.id, "r1/1", _failed()) for d in leased[1:]]
    assert await asyncio.gather(first, *rest) == [True] * 30
    assert counting.writes == [1, 29]


async def test_a_lost_lease_answers_false_and_writes_nothing(
    repo: WebhookRepository, caplog: pytest.LogCaptureFixture
) -> None:
    writer, _ = _writer(repo)
    kept = await _leased(repo, "r1/1")
    # Taken over by another replica after this one's lease expired.
    lost = await _leased(repo, "r2/7")
    answers = await asyncio.gather(
        writer.record(kept.id, "r1/1", _failed()), writer.record(lost.id, "r1/1", _failed())
    )
    assert list(answers) == [True, False]
    stored = await repo.deliveries.find_one({"_id": lost.id})
    assert stored is not None
    assert (stored["status"], stored["attempts"], stored["lease_owner"]) == ("pending", 0, "r2/7")
    lost_lines = [r.getMessage() for r in caplog.records if "lease was lost" in r.getMessage()]
    assert lost_lines == [f"delivery {lost.id}: outcome not recorded: its lease was lost"]


async def test_an_outcome_of_a_deleted_delivery_is_not_reported_as_a_lost_lease(
    repo: WebhookRepository, caplog: pytest.LogCaptureFixture
) -> None:
    """Its webhook was deleted (with its deliveries) while the attempt was made: nothing an
    operator must look into, so no warning (a warning per delivery said its lease was lost)."""
    writer, _ = _writer(repo)
    gone = await _leased(repo, "r1/1")
    await repo.deliveries.delete_one({"_id": gone.id})

    assert await writer.record(gone.id, "r1/1", _failed()) is False

    assert [r for r in caplog.records if r.levelname == "WARNING"] == []


async def test_only_recorded_attempts_count_for_the_endpoint(repo: WebhookRepository) -> None:
    writer, _ = _writer(repo)
    hook = webhook()
    await repo.webhooks.insert_one(hook.to_document())
    kept = await _leased(repo, "r1/1", webhook_id=hook.id)
    lost = await _leased(repo, "r2/1", webhook_id=hook.id)
    failure = AttemptResult(hook.id, False, T0)
    await asyncio.gather(
        writer.record(kept.id, "r1/1", _failed(), failure),
        writer.record(lost.id, "r1/1", _failed(), failure),
    )
    # Written after the attempts have their answer, for both at once: one, not two.
    stored = await _once_failing(repo, hook.id)
    assert (stored["consecutive_failures"], stored["failing_since"]) == (1, T0)


async def test_a_manual_request_is_cleared_unless_a_newer_one_came(
    repo: WebhookRepository,
) -> None:
    writer, _ = _writer(repo)
    asked = T0 - timedelta(seconds=5)
    answered = await _leased(repo, "r1/1", manual_at=asked)
    newer = await _leased(repo, "r1/1", manual_at=T0)  # asked again while in flight
    changes = {"status": "delivered", "attempts": 1, "trigger": "manual"}
    await asyncio.gather(
        writer.record(answered.id, "r1/1", changes, manual_at=asked),
        writer.record(newer.id, "r1/1", changes, manual_at=asked),
    )
    first = await repo.deliveries.find_one({"_id": answered.id})
    second = await repo.deliveries.find_one({"_id": newer.id})
    assert first is not None
    assert "manual_at" not in first
    assert second is not None
    assert second["manual_at"] == T0


class _Watched:
    """The deliveries collection, reading the delivery back after each bulk write."""

    def __init__(self, collection: Any, delivery_id: str) -> None:
        self._collection = collection
        self._id = delivery_id
        self.states: list[dict[str, Any]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._collection, name)

    async def bulk_write(self, *args: Any, **kwargs: Any) -> Any:
        result = await self._collection.bulk_write(*args, **kwargs)
        doc = await self._collection.find_one({"_id": self._id})
        self.states.append(doc)
        return result


async def test_a_manual_attempt_is_never_free_and_still_asked_for(
    repo: WebhookRepository,
) -> None:
    """The request was cleared after the lease was given back: for that moment the delivery
    was free and still asked for, so a claim could attempt it again (a second manual attempt
    nobody asked for) or read it back as a scheduled one (a delivered delivery rescheduled)."""
    asked = T0 - timedelta(seconds=1)
    record = await _leased(repo, "r1/1", status="delivered", manual_at=asked)
    watched = _Watched(repo.deliveries, record.id)
    repo.deliveries = watched  # type: ignore[assignment]
    recorded = await repo.record_attempts(
        [(record.id, "r1/1", {"status": "delivered", "attempts": 2})], {record.id: asked}
    )
    assert recorded == {record.id}
    for state in watched.states:
        free = state.get("lease_owner") is None
        assert not (free and state.get("manual_at") is not None), state
    assert watched.states[-1]["lease_owner"] is None
    assert "manual_at" not in watched.states[-1]
