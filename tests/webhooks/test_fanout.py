"""Fan-out: one pending delivery per enabled, subscribed webhook of the event's account and
mode; none for disabled webhooks or other scopes; a redelivered event creates nothing new; a
consumer's batch costs one query per account and mode and one insert."""

import json
from datetime import UTC, datetime

from services.webhooks.delivery import fan_out, fan_out_batch
from services.webhooks.repository import WebhookRepository
from shared.clock import Clock
from shared.mongo import Origin, count_commands
from tests.webhooks.records import event, webhook

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
DELAYS = [0.0, 30.0]


class FixedClock(Clock):
    def now(self) -> datetime:
        return NOW


async def test_only_enabled_subscribed_webhooks_of_the_scope_get_a_delivery(
    repo: WebhookRepository,
) -> None:
    issued = webhook(events=["pass.issued"])
    everything = webhook(events=["*"])
    hooks = [
        issued,
        everything,
        webhook(events=["*"], enabled=False),
        webhook(events=["pass.voided"]),
        webhook(events=["*"], mode="live"),
        webhook(events=["*"], account_id="acct_other"),
    ]
    for slot, hook in enumerate(hooks):
        await repo.insert(hook, None, slot)
    created = event("created")
    made = await fan_out(repo, FixedClock(), DELAYS, created)
    assert {d.webhook_id for d in made} == {issued.id, everything.id}
    stored = [doc async for doc in repo.deliveries.find()]
    assert {doc["webhook_id"] for doc in stored} == {issued.id, everything.id}
    for doc in stored:
        assert doc["status"] == "pending"
        assert doc["attempts"] == 0
        assert doc["event_id"] == created.id
        assert doc["event_type"] == "pass.issued"
        assert doc["next_attempt_at"] == NOW
        assert json.loads(doc["payload"])["id"] == created.id


async def test_a_redelivered_event_creates_nothing_new(repo: WebhookRepository) -> None:
    await repo.insert(webhook(), None, 0)
    created = event("created")
    assert len(await fan_out(repo, FixedClock(), DELAYS, created)) == 1
    assert await fan_out(repo, FixedClock(), DELAYS, created) == []
    assert await repo.deliveries.count_documents({}) == 1


async def test_events_without_a_webhook_type_create_nothing(repo: WebhookRepository) -> None:
    await repo.insert(webhook(), None, 0)
    assert await fan_out(repo, FixedClock(), DELAYS, event("url_viewed")) == []
    assert await repo.deliveries.count_documents({}) == 0


async def test_live_events_reach_live_webhooks_only(repo: WebhookRepository) -> None:
    test_hook, live_hook = webhook(), webhook(mode="live")
    await repo.insert(test_hook, None, 0)
    await repo.insert(live_hook, None, 0)
    await fan_out(repo, FixedClock(), DELAYS, event("voided", mode="live"))
    [doc] = [doc async for doc in repo.deliveries.find()]
    assert doc["webhook_id"] == live_hook.id
    assert json.loads(doc["payload"])["data"]["pass"]["mode"] == "live"


async def test_a_batch_is_one_query_per_scope_and_one_insert_and_skips_redeliveries(
    repo: WebhookRepository,
) -> None:
    ours, theirs = webhook(events=["pass.issued"]), webhook(account_id="acct_b")
    await repo.insert(ours, None, 0)
    await repo.insert(theirs, None, 0)
    redelivered = event("created")
    assert len(await fan_out(repo, FixedClock(), DELAYS, redelivered)) == 1
    batch = [
        redelivered,
        *(event("created") for _ in range(3)),
        event("voided"),  # ours does not want it
        event("created", account_id="acct_b"),
        event("url_viewed"),  # no webhook type at all
    ]
    sent: list[str] = []

    def count(command: str, origin: Origin) -> None:
        sent.append(command)

    count_commands(count)
    try:
        made = await fan_out_batch(repo, FixedClock(), DELAYS, batch)
    finally:
        count_commands(None)
    assert sorted(sent) == ["find", "find", "insert"]
    assert [(d.webhook_id, d.event_id) for d in made] == [
        *((ours.id, e.id) for e in batch[1:4]),
        (theirs.id, batch[5].id),
    ]
    assert await repo.deliveries.count_documents({}) == 5
