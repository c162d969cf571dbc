"""A webhook's `max_deliveries_per_second` against a real MongoDB-wire store: send slots spaced
1/rate apart, shared by every taker (replica), and nothing kept for a webhook without a rate."""

import asyncio
import itertools
from datetime import UTC, datetime, timedelta

from services.webhooks.repository import WebhookRepository
from services.webhooks.throttle import Throttle
from shared.models import WebhookRecord
from tests.webhooks.records import webhook

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
RATE = 5
INTERVAL = timedelta(seconds=1 / RATE)


async def _hook(repo: WebhookRepository, rate: int | None = RATE) -> WebhookRecord:
    record = webhook(max_deliveries_per_second=rate)
    await repo.webhooks.insert_one(record.to_document())
    return record


async def test_slots_are_spaced_one_over_the_rate(repo: WebhookRepository) -> None:
    throttle = Throttle(repo)
    hook = await _hook(repo)
    assert await throttle.take(hook, T0) is None
    # The slot is taken: the next send waits for the next one, 1/rate later.
    assert await throttle.take(hook, T0) == T0 + INTERVAL
    assert await throttle.take(hook, T0 + INTERVAL / 2) == T0 + INTERVAL
    assert await throttle.take(hook, T0 + INTERVAL) is None
    assert await throttle.take(hook, T0 + INTERVAL) == T0 + 2 * INTERVAL
    # A send after a quiet spell goes at once and spaces the next from itself, not from the
    # last slot: no burst is saved up.
    later = T0 + timedelta(seconds=10)
    assert await throttle.take(hook, later) is None
    assert await throttle.take(hook, later) == later + INTERVAL


async def test_of_takers_at_once_one_sends_and_the_others_wait(repo: WebhookRepository) -> None:
    # Two Throttles on the same store: two replicas.
    replicas = [Throttle(repo), Throttle(repo)]
    hook = await _hook(repo)
    answers = await asyncio.gather(*(replicas[n % 2].take(hook, T0) for n in range(10)))
    assert answers.count(None) == 1
    assert {answer for answer in answers if answer is not None} == {T0 + INTERVAL}


async def test_a_rate_allows_at_most_that_many_sends_in_any_second(
    repo: WebhookRepository,
) -> None:
    throttle = Throttle(repo)
    hook = await _hook(repo)
    sent: list[datetime] = []
    now = T0
    # Senders that retry whenever they are told to: only the rate gets through.
    while now < T0 + timedelta(seconds=3):
        wait = await throttle.take(hook, now)
        if wait is None:
            sent.append(now)
            now += timedelta(milliseconds=10)
        else:
            assert wait > now
            now = wait
    assert len(sent) == 3 * RATE
    gaps = {later - earlier for earlier, later in itertools.pairwise(sent)}
    assert gaps == {INTERVAL}


async def test_a_webhook_without_a_rate_is_never_held(repo: WebhookRepository) -> None:
    throttle = Throttle(repo)
    hook = await _hook(repo, rate=None)
    for _ in range(20):
        assert await throttle.take(hook, T0) is None
    stored = await repo.webhooks.find_one({"_id": hook.id})
    assert stored is not None
    assert "next_send_at" not in stored
