"""Claims and the scheduler loop against a real MongoDB-wire store: exclusive claims, lease
takeover, a slow endpoint that never holds back the others, and a busy account that never holds
back other accounts."""

import asyncio
import itertools
import json
from collections import Counter
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from services.webhooks.repository import WebhookRepository
from services.webhooks.retries import NextState
from services.webhooks.scheduler import FRESH_SECONDS, Scheduler
from shared.clock import SystemClock
from shared.models import DeliveryRecord, WebhookRecord
from tests.webhooks.records import delivery, webhook

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
LEASE = timedelta(seconds=60)


async def _claim_one(
    repo: WebhookRepository, listed: DeliveryRecord, now: datetime, until: datetime, token: str
) -> bool:
    return bool(await repo.claim([listed], now, until, token))


async def _record(
    repo: WebhookRepository, delivery_id: str, token: str, changes: dict[str, Any]
) -> bool:
    return delivery_id in await repo.record_attempts([(delivery_id, token, changes)])


async def _claim_next(
    repo: WebhookRepository, now: datetime, token: str, skip: list[str] | None = None
) -> DeliveryRecord | None:
    for listed in await repo.due(now, 10, skip or []):
        if await _claim_one(repo, listed, now, now + LEASE, token):
            return listed
    return None


async def test_concurrent_claimers_never_claim_the_same_delivery(repo: WebhookRepository) -> None:
    for n in range(40):
        await repo.insert_delivery(delivery(webhook_id=f"whk_{n % 4}", next_attempt_at=T0))
    claimed: Counter[str] = Counter()

    async def claimer(name: str) -> None:
        for n in range(1000):
            record = await _claim_next(repo, T0, f"{name}/{n}")
            if record is None:
                return
            claimed[record.id] += 1

    await asyncio.gather(*(claimer(f"replica{r}") for r in range(6)))
    assert len(claimed) == 40
    assert set(claimed.values()) == {1}


async def test_a_live_lease_holds_and_an_expired_one_is_taken_over(
    repo: WebhookRepository,
) -> None:
    await repo.insert_delivery(delivery(next_attempt_at=T0))
    first = await _claim_next(repo, T0, "dead-replica/1")
    assert first is not None
    assert await repo.due(T0 + LEASE / 2, 10, []) == []
    assert not await _claim_one(repo, first, T0 + LEASE / 2, T0 + LEASE * 2, "other/1")
    later = T0 + LEASE + timedelta(seconds=1)
    [expired] = await repo.due(later, 10, [])
    assert expired.lease_owner == "dead-replica/1"
    assert await _claim_one(repo, expired, later, later + LEASE, "other/2")
    # The replica that lost its lease can no longer record an outcome; the new holder can.
    assert not await _record(repo, first.id, "dead-replica/1", {"status": "delivered"})
    assert await _record(repo, first.id, "other/2", {"status": "failed", "attempts": 1})
    stored = await repo.deliveries.find_one({"_id": first.id})
    assert stored is not None
    assert (stored["status"], stored["lease_owner"], stored["lease_until"]) == (
        "failed",
        None,
        None,
    )


async def test_only_due_unfinished_deliveries_are_listed(repo: WebhookRepository) -> None:
    later = delivery(next_attempt_at=T0 + timedelta(seconds=30))
    done = delivery(status="delivered", next_attempt_at=None)
    for record in (
        later,
        done,
        delivery(status="dead", next_attempt_at=None),
        delivery(status="failed", webhook_id="whk_busy", next_attempt_at=T0),
    ):
        await repo.insert_delivery(record)
    assert await repo.due(T0, 10, ["whk_busy"]) == []
    [listed] = await repo.due(T0 + timedelta(seconds=30), 10, ["whk_busy"])
    assert listed.id == later.id
    assert not await _claim_one(repo, done, T0, T0 + LEASE, "r/1")
    assert not await _claim_one(repo, later, T0, T0 + LEASE, "r/2")  # not due yet


async def test_due_order_is_oldest_first_and_limited(repo: WebhookRepository) -> None:
    newer = delivery(next_attempt_at=T0)
    older = delivery(next_attempt_at=T0 - timedelta(seconds=5))
    await repo.insert_delivery(newer)
    await repo.insert_delivery(older)
    assert [d.id for d in await repo.due(T0, 1, [])] == [older.id]
    assert [d.id for d in await repo.due(T0, 5, [])] == [older.id, newer.id]


async def test_a_delivery_attempted_since_it_was_listed_is_claimed_as_it_is_now(
    repo: WebhookRepository,
) -> None:
    await repo.insert_delivery(delivery(next_attempt_at=T0))
    [listed] = await repo.due(T0, 10, [])
    # Another replica claims, attempts and records a failure due again at once.
    assert await _claim_one(repo, listed, T0, T0 + LEASE, "other/1")
    changes = {"status": "failed", "attempts": 1, "next_attempt_at": T0}
    assert await _record(repo, listed.id, "other/1", changes)
    # Claimed with its stored attempt count, so the next outcome never counts back.
    [claimed] = await repo.claim([listed], T0, T0 + LEASE, "late/1")
    assert (claimed.attempts, claimed.status, claimed.lease_owner) == (1, "failed", "late/1")


async def test_a_claim_leaves_out_what_is_no_longer_due(repo: WebhookRepository) -> None:
    records = [delivery(next_attempt_at=T0) for _ in range(3)]
    for record in records:
        await repo.insert_delivery(record)
    listed = await repo.due(T0, 10, [])
    assert await _claim_one(repo, records[0], T0, T0 + LEASE, "other/1")
    await _record(repo, records[1].id, "nobody/1", {"status": "delivered"})  # not its lease
    await repo.deliveries.update_one({"_id": records[1].id}, {"$set": {"status": "delivered"}})
    won = await repo.claim(listed, T0, T0 + LEASE, "mine/1")
    assert [d.id for d in won] == [records[2].id]


async def test_accounts_at_their_limit_are_not_listed(repo: WebhookRepository) -> None:
    busy = delivery(account_id="acct_busy", next_attempt_at=T0 - timedelta(seconds=5))
    other = delivery(account_id="acct_other", next_attempt_at=T0)
    await repo.insert_delivery(busy)
    await repo.insert_delivery(other)
    assert [d.id for d in await repo.due(T0, 1, [])] == [busy.id]
    assert [d.id for d in await repo.due(T0, 1, [], ["acct_busy"])] == [other.id]


def _scheduler(
    repo: WebhookRepository,
    *,
    max_concurrent: int,
    per_endpoint: int,
    per_account: int = 1000,
    poll_seconds: float = 0.05,
    lease_seconds: float = 60,
) -> Scheduler:
    return Scheduler(
        repo,
        SystemClock(),
        lease_seconds=lease_seconds,
        timeout_seconds=lease_seconds / 6,
        max_concurrent=max_concurrent,
        max_per_endpoint=per_endpoint,
        max_per_account=per_account,
        poll_seconds=poll_seconds,
    )


async def test_a_slow_endpoint_never_holds_back_the_others(repo: WebhookRepository) -> None:
    now = datetime.now(UTC)
    for n in range(8):  # the slow endpoint's deliveries are due first
        await repo.insert_delivery(
            delivery(webhook_id="whk_slow", next_attempt_at=now - timedelta(seconds=10 - n))
        )
    fast = delivery(webhook_id="whk_fast", next_attempt_at=now)
    await repo.insert_delivery(fast)
    release, fast_done = asyncio.Event(), asyncio.Event()
    slow_in_flight: list[int] = []
    running = Counter[str]()

    async def attempt(
        record: DeliveryRecord, hook: WebhookRecord | None, token: str, sent: Callable[[], None]
    ) -> NextState | None:
        running[record.webhook_id] += 1
        slow_in_flight.append(running["whk_slow"])
        if record.webhook_id == "whk_slow":
            await release.wait()
        else:
            fast_done.set()
        await _record(repo, record.id, token, {"status": "delivered", "attempts": 1})
        running[record.webhook_id] -= 1
        return NextState("delivered", None)

    scheduler = _scheduler(repo, max_concurrent=4, per_endpoint=2)
    scheduler.start(attempt)
    try:
        await asyncio.wait_for(fast_done.wait(), timeout=10)
        assert max(slow_in_flight) == 2  # the per-endpoint limit, while the fast one went out
        release.set()
        await _until(lambda: _count(repo, "delivered"), 9)
    finally:
        await scheduler.stop(grace_seconds=5)


async def test_two_schedulers_attempt_each_delivery_once(repo: WebhookRepository) -> None:
    for n in range(60):
        await repo.insert_delivery(delivery(webhook_id=f"whk_{n % 6}"))
    attempted: Counter[str] = Counter()

    async def attempt(
        record: DeliveryRecord, hook: WebhookRecord | None, token: str, sent: Callable[[], None]
    ) -> NextState | None:
        attempted[record.id] += 1
        await asyncio.sleep(0)  # yield, so the two replicas interleave
        await _record(repo, record.id, token, {"status": "delivered", "attempts": 1})
        return NextState("delivered", None)

    replicas = [_scheduler(repo, max_concurrent=8, per_endpoint=2) for _ in range(2)]
    for replica in replicas:
        replica.start(attempt)
        replica.kick()
    try:
        await _until(lambda: _count(repo, "delivered"), 60)
    finally:
        for replica in replicas:
            await replica.stop(grace_seconds=5)
    assert len(attempted) == 60
    assert set(attempted.values()) == {1}


async def test_a_lease_is_renewed_while_an_outcome_is_slow_to_record(
    repo: WebhookRepository,
) -> None:
    """A store slow to take an attempt's outcome (three leases long here) must not let
    another replica take the delivery over and send the attempt again."""
    record = delivery(next_attempt_at=datetime.now(UTC))
    await repo.insert_delivery(record)
    lease_seconds = 0.6
    attempted: list[str] = []
    recorded: list[bool] = []
    started = asyncio.Event()

    async def attempt(
        d: DeliveryRecord, hook: WebhookRecord | None, token: str, sent: Callable[[], None]
    ) -> NextState | None:
        attempted.append(token)
        started.set()
        sent()
        await asyncio.sleep(lease_seconds * 3)  # the outcome write waits on a slow store
        recorded.append(await _record(repo, d.id, token, {"status": "delivered", "attempts": 1}))
        return NextState("delivered", None)

    holder = _scheduler(repo, max_concurrent=4, per_endpoint=2, lease_seconds=lease_seconds)
    peer = _scheduler(repo, max_concurrent=4, per_endpoint=2, lease_seconds=lease_seconds)
    holder.start(attempt)
    try:
        await asyncio.wait_for(started.wait(), timeout=10)
        peer.start(attempt)  # polls every 50 ms from now on
        await _until(lambda: _count(repo, "delivered"), 1)
    finally:
        for scheduler in (holder, peer):
            await scheduler.stop(grace_seconds=5)
    assert len(attempted) == 1, "the peer took the delivery over and sent it again"
    assert recorded == [True]


async def _count(repo: WebhookRepository, status: str) -> int:
    return await repo.deliveries.count_documents({"status": status})


async def _until(fetch: Callable[[], Awaitable[int]], expected: int) -> None:
    """Poll until `fetch()` returns `expected`, for at most 15 s."""
    async with asyncio.timeout(15):
        for _ in itertools.count():
            if await fetch() == expected:
                return
            await asyncio.sleep(0.02)


async def test_a_new_delivery_is_attempted_without_waiting_for_the_poll(
    repo: WebhookRepository,
) -> None:
    attempted = asyncio.Event()

    async def attempt(
        record: DeliveryRecord, hook: WebhookRecord | None, token: str, sent: Callable[[], None]
    ) -> NextState | None:
        await _record(repo, record.id, token, {"status": "delivered", "attempts": 1})
        attempted.set()
        return NextState("delivered", None)

    # The poll never comes during this test.
    scheduler = _scheduler(repo, max_concurrent=4, per_endpoint=2, poll_seconds=3600)
    listed = asyncio.Event()
    real_due = repo.due

    async def due(
        now: datetime, limit: int, skip_webhooks: list[str], skip_accounts: list[str] | None = None
    ) -> list[DeliveryRecord]:
        found = await real_due(now, limit, skip_webhooks, skip_accounts)
        listed.set()
        return found

    repo.due = due  # type: ignore[method-assign]  # to know when the loop's first pass ended
    scheduler.start(attempt)
    try:
        await asyncio.wait_for(listed.wait(), timeout=5)
        # Stored by the consumer's path: leased as it is inserted, attempted at once.
        await scheduler.store_new([delivery()], {})
        await asyncio.wait_for(attempted.wait(), timeout=5)
    finally:
        await scheduler.stop(grace_seconds=5)
    assert await _count(repo, "delivered") == 1


class _Blocking:
    """An attempt that holds the busy account's deliveries until released, and records how
    many of them were in flight at most."""

    def __init__(self, repo: WebhookRepository, busy_account: str, busy_mode: str | None = None):
        self._repo = repo
        self._busy = busy_account
        self._busy_mode = busy_mode
        self.release = asyncio.Event()
        self.other_done = asyncio.Event()
        self.in_flight = 0
        self.most_in_flight = 0

    async def __call__(
        self,
        record: DeliveryRecord,
        hook: WebhookRecord | None,
        token: str,
        sent: Callable[[], None],
    ) -> NextState | None:
        if record.account_id == self._busy and self._busy_mode in (None, record.mode):
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
            await self.release.wait()
            self.in_flight -= 1
        else:
            self.other_done.set()
        await _record(self._repo, record.id, token, {"status": "delivered", "attempts": 1})
        return NextState("delivered", None)


async def test_a_busy_account_never_holds_back_another(repo: WebhookRepository) -> None:
    now = datetime.now(UTC)
    for n in range(12):  # many slow webhooks of one account, all due before the other's
        await repo.insert_delivery(
            delivery(
                account_id="acct_busy",
                webhook_id=f"whk_slow{n}",
                next_attempt_at=now - timedelta(seconds=20 - n),
            )
        )
    await repo.insert_delivery(delivery(account_id="acct_other", next_attempt_at=now))
    attempt = _Blocking(repo, "acct_busy")
    scheduler = _scheduler(repo, max_concurrent=4, per_endpoint=2, per_account=2)
    scheduler.start(attempt)
    try:
        await asyncio.wait_for(attempt.other_done.wait(), timeout=10)
        assert attempt.most_in_flight == 2  # the account's share, not the replica's 4 slots
        attempt.release.set()
        await _until(lambda: _count(repo, "delivered"), 13)
    finally:
        await scheduler.stop(grace_seconds=5)
    assert attempt.most_in_flight == 2


async def test_an_accounts_test_mode_never_holds_back_its_live_mode(
    repo: WebhookRepository,
) -> None:
    """Test and live are kept apart everywhere else (limits, quotas, data): slow test-mode
    webhooks took the account's whole share of sending slots and held its live deliveries."""
    now = datetime.now(UTC)
    for n in range(12):
        await repo.insert_delivery(
            delivery(
                account_id="acct_one",
                mode="test",
                webhook_id=f"whk_slow{n}",
                next_attempt_at=now - timedelta(seconds=20 - n),
            )
        )
    await repo.insert_delivery(delivery(account_id="acct_one", mode="live", next_attempt_at=now))
    attempt = _Blocking(repo, "acct_one", busy_mode="test")
    scheduler = _scheduler(repo, max_concurrent=4, per_endpoint=2, per_account=2)
    scheduler.start(attempt)
    try:
        await asyncio.wait_for(attempt.other_done.wait(), timeout=10)
        assert attempt.most_in_flight == 2  # the test mode's share
        attempt.release.set()
        await _until(lambda: _count(repo, "delivered"), 13)
    finally:
        await scheduler.stop(grace_seconds=5)


async def test_new_deliveries_keep_to_the_account_share(repo: WebhookRepository) -> None:
    attempt = _Blocking(repo, "acct_busy")
    scheduler = _scheduler(repo, max_concurrent=4, per_endpoint=2, per_account=2)
    scheduler.start(attempt)
    try:
        busy = [delivery(account_id="acct_busy", webhook_id=f"whk_{n}") for n in range(6)]
        await scheduler.store_new(busy, {})
        # All leased to this replica, two of them sending (the account's share), the rest
        # waiting in memory for a slot.
        await _until(lambda: _leased(repo, "acct_busy"), 6)
        await scheduler.store_new([delivery(account_id="acct_other")], {})
        await asyncio.wait_for(attempt.other_done.wait(), timeout=10)
        assert attempt.most_in_flight == 2
        attempt.release.set()
        await _until(lambda: _count(repo, "delivered"), 7)
    finally:
        await scheduler.stop(grace_seconds=5)
    assert attempt.most_in_flight == 2


async def _leased(repo: WebhookRepository, account_id: str) -> int:
    return await repo.deliveries.count_documents(
        {"account_id": account_id, "lease_owner": {"$ne": None}}
    )


async def test_a_pause_heard_while_deliveries_wait_holds_them_back(
    repo: WebhookRepository,
) -> None:
    """A Retry-After answer pauses the endpoint for the deliveries already leased and waiting
    for its slot too: they are postponed to the pause's end, not sent, not counted."""
    now = datetime.now(UTC)
    pause_until = now + timedelta(seconds=30)
    records = [delivery(webhook_id="whk_busy", next_attempt_at=now) for _ in range(4)]
    for record in records:
        await repo.insert_delivery(record)
    attempted: list[str] = []

    async def attempt(
        record: DeliveryRecord,
        hook: WebhookRecord | None,
        token: str,
        sent: Callable[[], None],
    ) -> NextState | None:
        attempted.append(record.id)
        changes = {"status": "failed", "attempts": 1, "next_attempt_at": pause_until}
        await _record(repo, record.id, token, changes)
        return NextState("failed", pause_until, paused_until=pause_until)

    scheduler = _scheduler(repo, max_concurrent=4, per_endpoint=1)
    scheduler.start(attempt)
    try:
        await _until(lambda: _postponed(repo, pause_until), 3)
    finally:
        await scheduler.stop(grace_seconds=5)
    assert len(attempted) == 1
    assert await repo.deliveries.count_documents({"attempts": 0, "lease_owner": None}) == 3


async def _postponed(repo: WebhookRepository, until: datetime) -> int:
    return await repo.deliveries.count_documents(
        {"attempts": 0, "next_attempt_at": {"$gte": until - timedelta(milliseconds=1)}}
    )


async def test_a_delivery_that_waited_for_its_slot_is_sent_as_its_webhook_is_now(
    repo: WebhookRepository,
) -> None:
    """A delivery waits behind a slow attempt to the same endpoint (one slot) while its
    webhook's URL changes: it is sent to the new URL, not to the copy read with its claim (a
    copy that could be minutes old: a leaked secret rotated away, a disabled or deleted
    webhook would still have been used)."""
    hook = webhook(_id="whk_moving", url="http://127.0.0.1:9/old")
    await repo.webhooks.insert_one(hook.to_document())
    now = datetime.now(UTC)
    first, second = (
        delivery(webhook_id=hook.id, next_attempt_at=now - timedelta(seconds=n)) for n in (2, 1)
    )
    for record in (first, second):
        await repo.insert_delivery(record)
    sent_to: dict[str, str | None] = {}
    first_started = asyncio.Event()

    async def attempt(
        record: DeliveryRecord, current: WebhookRecord | None, token: str, sent: Callable[[], None]
    ) -> NextState | None:
        sent_to[record.id] = current.url if current else None
        if record.id == first.id:
            first_started.set()
            # A slow endpoint: the second delivery waits longer than its copy may be used.
            await asyncio.sleep(FRESH_SECONDS * 2)
        sent()
        await _record(repo, record.id, token, {"status": "delivered", "attempts": 1})
        return NextState("delivered", None)

    scheduler = _scheduler(repo, max_concurrent=4, per_endpoint=1)
    scheduler.start(attempt)
    try:
        await asyncio.wait_for(first_started.wait(), timeout=10)
        await repo.webhooks.update_one(
            {"_id": hook.id}, {"$set": {"url": "http://127.0.0.1:9/new"}}
        )
        await _until(lambda: _count(repo, "delivered"), 2)
    finally:
        await scheduler.stop(grace_seconds=5)
    assert sent_to == {first.id: "http://127.0.0.1:9/old", second.id: "http://127.0.0.1:9/new"}


async def test_a_delivery_that_waited_for_its_slot_sends_its_body_as_a_redaction_left_it(
    repo: WebhookRepository,
) -> None:
    """A delivery waits behind a slow attempt to the same endpoint while its pass is redacted:
    it sends the body the redaction erased, not the holder's data read with its claim
    (docs/privacy.md)."""
    hook = webhook(_id="whk_slow_one")
    await repo.webhooks.insert_one(hook.to_document())
    now = datetime.now(UTC)
    body = {
        "type": "pass.issued",
        "data": {"pass": {"id": "pass_held", "holder_name": "Ada Lovelace"}},
    }
    first, waiting = (
        delivery(
            webhook_id=hook.id,
            pass_id="pass_held",
            payload=json.dumps(body),
            next_attempt_at=now - timedelta(seconds=n),
        )
        for n in (3, 2)
    )
    for record in (first, waiting):
        await repo.insert_delivery(record)
    sent: dict[str, str] = {}
    first_started, release = asyncio.Event(), asyncio.Event()

    async def attempt(
        record: DeliveryRecord, current: WebhookRecord | None, token: str, free: Callable[[], None]
    ) -> NextState | None:
        sent[record.id] = record.payload
        if record.id == first.id:
            first_started.set()
            await release.wait()  # a slow endpoint: the other waits for the only slot
        free()
        await _record(repo, record.id, token, {"status": "delivered", "attempts": 1})
        return NextState("delivered", None)

    scheduler = _scheduler(repo, max_concurrent=4, per_endpoint=1)
    scheduler.start(attempt)
    try:
        await asyncio.wait_for(first_started.wait(), timeout=10)
        waiting_since = asyncio.get_running_loop().time()
        assert await repo.erase_pass_copies("acct_a", "test", "pass_held", "evt_kept") == 2

        async def seen_and_waited() -> int:
            waited = asyncio.get_running_loop().time() - waiting_since > FRESH_SECONDS
            return int(waited and scheduler._erased.body_of(waiting.id) is not None)

        await _until(seen_and_waited, 1)
        release.set()
        await _until(lambda: _count(repo, "delivered"), 2)
    finally:
        release.set()
        await scheduler.stop(grace_seconds=5)
    assert set(sent) == {first.id, waiting.id}
    assert "Ada" in sent[first.id]  # it left before the redaction
    assert json.loads(sent[waiting.id])["data"]["pass"]["holder_name"] is None


async def test_deliveries_waiting_when_the_replica_stops_are_given_back_not_sent(
    repo: WebhookRepository,
) -> None:
    """SIGTERM while two deliveries wait behind an attempt in flight (one slot): they are
    given back at once, and when the attempt ends during the stop's grace they do not take
    its slot and go out (another replica, free to take them, would send them again)."""
    now = datetime.now(UTC)
    records = [delivery(webhook_id="whk_slow", next_attempt_at=now) for _ in range(3)]
    for record in records:
        await repo.insert_delivery(record)
    attempted: list[str] = []
    in_flight, finish = asyncio.Event(), asyncio.Event()

    async def attempt(
        record: DeliveryRecord, hook: WebhookRecord | None, token: str, sent: Callable[[], None]
    ) -> NextState | None:
        attempted.append(record.id)
        in_flight.set()
        await finish.wait()
        sent()
        await _record(repo, record.id, token, {"status": "delivered", "attempts": 1})
        return NextState("delivered", None)

    scheduler = _scheduler(repo, max_concurrent=4, per_endpoint=1)
    scheduler.start(attempt)
    await asyncio.wait_for(in_flight.wait(), timeout=10)
    await _until(lambda: _leased(repo, "acct_a"), 3)  # one in flight, two waiting for the slot
    stopping = asyncio.create_task(scheduler.stop(grace_seconds=5))
    await _until(lambda: _leased(repo, "acct_a"), 1)  # the two waiting ones given back at once
    finish.set()
    await stopping

    assert len(attempted) == 1
    assert await _count(repo, "delivered") == 1
    assert await repo.deliveries.count_documents({"attempts": 0, "lease_owner": None}) == 2
