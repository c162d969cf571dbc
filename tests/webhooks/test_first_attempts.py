"""New deliveries through the scheduler's `store_new` against a real MongoDB-wire store: first
attempts sent before the store, stored with their outcome; attempts that outlive the budget
stored leased and recorded later; a redelivered event's deliveries stored before any attempt;
what does not fit the limits stored unleased."""

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from services.webhooks import scheduler as scheduler_module
from services.webhooks.delivery import Attempted
from services.webhooks.endpoint_health import AttemptResult
from services.webhooks.repository import WebhookRepository
from services.webhooks.retries import NextState
from services.webhooks.scheduler import Scheduler
from shared.clock import SystemClock
from shared.ids import derived_id
from shared.models import DeliveryRecord, WebhookRecord
from tests.webhooks.records import delivery, webhook
from tests.webhooks.test_scheduler import _record, _until


class FirstSender:
    """Sends by answering at once, or, for the webhooks in `slow`, once released."""

    def __init__(self, repo: WebhookRepository, slow: frozenset[str] = frozenset()) -> None:
        self._repo = repo
        self.slow = slow
        self.release = asyncio.Event()
        self.sent: list[str] = []
        self.stored_sent: list[str] = []
        self.recorded: list[str] = []

    def sends_at_once(self, hook: WebhookRecord, now: datetime) -> bool:
        return hook.enabled

    async def send(
        self,
        d: DeliveryRecord,
        hook: WebhookRecord,
        now: datetime,
        sent: Callable[[], None],
        *,
        fresh: bool = False,
    ) -> Attempted:
        if hook.id in self.slow:
            await self.release.wait()
        self.sent.append(d.id)
        sent()
        changes = {"status": "delivered", "attempts": 1, "next_attempt_at": None}
        changes |= {"last_attempt_at": now, "response_status": 200, "response_body": ""}
        changes |= {"trigger": "scheduled"}
        return Attempted(NextState("delivered", None), changes, AttemptResult(hook.id, True, now))

    async def record(self, d: DeliveryRecord, token: str, attempted: Attempted) -> NextState | None:
        if await _record(self._repo, d.id, token, attempted.changes):
            self.recorded.append(d.id)
            return attempted.state
        return None

    async def stored(self, sent: list[tuple[DeliveryRecord, Attempted]]) -> None:
        self.stored_sent += [d.id for d, _ in sent]


async def _never(
    d: DeliveryRecord, hook: WebhookRecord | None, token: str, sent: Callable[[], None]
) -> NextState | None:
    raise AssertionError(f"{d.id} should have gone out as a first attempt")


def _scheduler(
    repo: WebhookRepository,
    per_endpoint: int = 4,
    lease_seconds: float = 60,
    poll_seconds: float = 3600,
) -> Scheduler:
    return Scheduler(
        repo,
        SystemClock(),
        lease_seconds=lease_seconds,
        timeout_seconds=lease_seconds / 6,
        max_concurrent=64,
        max_per_endpoint=per_endpoint,
        max_per_account=64,
        poll_seconds=poll_seconds,
    )


async def _stored(repo: WebhookRepository, delivery_id: str) -> dict[str, object]:
    doc = await repo.deliveries.find_one({"_id": delivery_id})
    assert doc is not None
    return doc


async def test_first_attempts_go_out_before_the_store_and_are_stored_with_their_outcome(
    repo: WebhookRepository,
) -> None:
    hook = webhook()
    created = [delivery(webhook_id=hook.id) for _ in range(5)]
    first = FirstSender(repo)
    scheduler = _scheduler(repo)
    scheduler.start(_never, first=first)
    try:
        stored = await scheduler.store_new(created, {hook.id: hook})
    finally:
        await scheduler.stop(grace_seconds=5)
    assert {d.id for d in stored} == {d.id for d in created}
    assert sorted(first.sent) == sorted(first.stored_sent) == sorted(d.id for d in created)
    for d in created:  # one insert with the outcome: no lease, no second write
        doc = await _stored(repo, d.id)
        assert (doc["status"], doc["attempts"], doc["lease_owner"]) == ("delivered", 1, None)


async def test_an_attempt_that_outlives_the_budget_is_stored_leased_then_recorded(
    repo: WebhookRepository,
) -> None:
    slow = webhook()
    created = delivery(webhook_id=slow.id)
    first = FirstSender(repo, slow=frozenset({slow.id}))
    scheduler = _scheduler(repo)
    scheduler.start(_never, first=first)
    try:
        await scheduler.store_new([created], {slow.id: slow})
        doc = await _stored(repo, created.id)
        assert (doc["status"], doc["attempts"]) == ("pending", 0)
        assert doc["lease_owner"] is not None  # nobody else takes it while it goes on
        first.release.set()
        await _until(lambda: _delivered(repo), 1)
    finally:
        await scheduler.stop(grace_seconds=5)
    assert first.recorded == [created.id]
    assert first.stored_sent == []


async def test_a_stored_leased_attempt_keeps_its_lease_until_recorded(
    repo: WebhookRepository,
) -> None:
    """A first attempt that goes on after its delivery is stored leased keeps that lease for
    as long as it takes (three leases here): a peer polling meanwhile never takes it over."""
    lease_seconds = 0.6
    slow = webhook()
    created = delivery(webhook_id=slow.id)
    first = FirstSender(repo, slow=frozenset({slow.id}))
    taken_over: list[str] = []

    async def peer_attempt(
        d: DeliveryRecord, hook: WebhookRecord | None, token: str, sent: Callable[[], None]
    ) -> NextState | None:
        taken_over.append(d.id)
        return None

    holder = _scheduler(repo, lease_seconds=lease_seconds)
    peer = _scheduler(repo, lease_seconds=lease_seconds, poll_seconds=0.05)
    holder.start(_never, first=first)
    peer.start(peer_attempt)
    try:
        await holder.store_new([created], {slow.id: slow})
        await asyncio.sleep(lease_seconds * 3)  # the receiver is slow to answer
        first.release.set()
        await _until(lambda: _delivered(repo), 1)
    finally:
        for scheduler in (holder, peer):
            await scheduler.stop(grace_seconds=5)
    assert taken_over == []
    assert first.recorded == [created.id]


async def test_a_redelivered_events_deliveries_are_stored_before_any_attempt(
    repo: WebhookRepository,
) -> None:
    hook = webhook()
    again = delivery(webhook_id=hook.id)
    attempted: list[str] = []

    async def attempt(
        d: DeliveryRecord, h: WebhookRecord | None, token: str, sent: Callable[[], None]
    ) -> NextState | None:
        # By the time the attempt is made, the delivery is in the store, leased.
        doc = await _stored(repo, d.id)
        assert doc["lease_owner"] == token
        attempted.append(d.id)
        await _record(repo, d.id, token, {"status": "delivered", "attempts": 1})
        return NextState("delivered", None)

    first = FirstSender(repo)
    scheduler = _scheduler(repo)
    scheduler.start(attempt, first=first)
    try:
        await scheduler.store_new([again], {hook.id: hook}, frozenset({again.event_id}))
        await _until(lambda: _delivered(repo), 1)
    finally:
        await scheduler.stop(grace_seconds=5)
    assert first.sent == []
    assert attempted == [again.id]


async def test_a_delivery_made_again_from_a_redelivered_event_keeps_its_id() -> None:
    at = int(datetime(2026, 11, 25, tzinfo=UTC).timestamp() * 1000)
    one = derived_id("webhook_delivery", at, "whk_a:psEvnt_1")
    assert one == derived_id("webhook_delivery", at, "whk_a:psEvnt_1")
    assert one != derived_id("webhook_delivery", at, "whk_b:psEvnt_1")
    assert one < derived_id("webhook_delivery", at + 1, "whk_a:psEvnt_0")  # time-ordered


async def _delivered(repo: WebhookRepository) -> int:
    return await repo.deliveries.count_documents({"status": "delivered"})


async def test_a_slow_endpoint_does_not_hold_up_the_storing_of_its_batch(
    repo: WebhookRepository, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once no attempt has ended for a quiet spell, the batch is stored: the healthy
    endpoints' deliveries with their outcome, the slow one's leased, long before the budget."""
    monkeypatch.setattr(scheduler_module, "FIRST_SEND_SECONDS", 3600.0)
    slow, quick = webhook(), webhook()
    created = [delivery(webhook_id=slow.id)] + [delivery(webhook_id=quick.id) for _ in range(8)]
    first = FirstSender(repo, slow=frozenset({slow.id}))
    scheduler = _scheduler(repo)
    scheduler.start(_never, first=first)
    try:
        async with asyncio.timeout(30):  # the budget is an hour: only the quiet spell ends it
            await scheduler.store_new(created, {slow.id: slow, quick.id: quick})
        assert len(first.stored_sent) == 8
        doc = await _stored(repo, created[0].id)
        assert (doc["status"], doc["lease_owner"] is not None) == ("pending", True)
        first.release.set()
        await _until(lambda: _delivered(repo), 9)
    finally:
        await scheduler.stop(grace_seconds=5)
