"""Resend and recover against a real MongoDB-wire store: what they mark for a manual attempt
(`manual_at`), what they leave alone (other webhooks, accounts, modes, statuses, times), when
they wake the scheduler, and a replayed command doing nothing twice."""

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from cryptography.fernet import Fernet

from services.webhooks.operations import DeliveryOperations
from services.webhooks.repository import WebhookRepository
from services.webhooks.secretbox import SecretBox
from services.webhooks.service import WebhookService
from shared.errors import InvalidRequest, NotFound
from shared.ids import new_id
from shared.messages import RecoverDeliveries, ResendDelivery, WebhookRecovery
from shared.models import DeliveryRecord, DeliveryStatus, WebhookRecord
from tests.webhooks.records import delivery, webhook

# Milliseconds only: what the store keeps of a datetime, so values read back compare equal.
NOW = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


class _Clock:
    def __init__(self) -> None:
        self.moment = NOW

    def now(self) -> datetime:
        return self.moment


class _Wakes:
    def __init__(self) -> None:
        self.count = 0

    def __call__(self) -> None:
        self.count += 1


@pytest.fixture
def wakes() -> _Wakes:
    return _Wakes()


@pytest.fixture
async def ops(repo: WebhookRepository, wakes: _Wakes) -> DeliveryOperations:
    operations = DeliveryOperations(repo.deliveries.database, _Clock(), wakes)
    await operations.ensure_indexes()
    return operations


async def _hook(repo: WebhookRepository, **fields: Any) -> WebhookRecord:
    record = webhook(**fields)
    await repo.webhooks.insert_one(record.to_document())
    return record


async def _delivery(
    repo: WebhookRepository, hook: WebhookRecord, status: DeliveryStatus, **fields: Any
) -> DeliveryRecord:
    record = delivery(
        webhook_id=hook.id,
        account_id=hook.account_id,
        mode=hook.mode,
        status=status,
        **({"created_at": NOW - timedelta(hours=1)} | fields),
    )
    await repo.deliveries.insert_one(record.to_document())
    return record


async def _manual_at(repo: WebhookRepository, delivery_id: str) -> datetime | None:
    doc = await repo.deliveries.find_one({"_id": delivery_id})
    assert doc is not None
    return DeliveryRecord.model_validate(doc).manual_at


def _resend(hook: WebhookRecord, delivery_id: str, **fields: Any) -> ResendDelivery:
    base = {"account_id": hook.account_id, "mode": hook.mode} | fields
    return ResendDelivery(
        command_id=new_id("command"), webhook_id=hook.id, delivery_id=delivery_id, **base
    )


def _recover(hook: WebhookRecord, since: datetime, until: datetime | None) -> RecoverDeliveries:
    return RecoverDeliveries(
        command_id=new_id("command"),
        account_id=hook.account_id,
        mode=hook.mode,
        webhook_id=hook.id,
        since=since,
        until=until,
    )


@pytest.mark.parametrize("status", ["delivered", "dead", "failed", "pending"])
async def test_a_resend_asks_for_an_attempt_now_whatever_the_status(
    repo: WebhookRepository, ops: DeliveryOperations, wakes: _Wakes, status: DeliveryStatus
) -> None:
    hook = await _hook(repo)
    stored = await _delivery(repo, hook, status)
    answered = await ops.resend(_resend(hook, stored.id))
    assert (answered.id, answered.status, answered.manual_at) == (stored.id, status, NOW)
    assert answered.trigger is None  # what made the last attempt: nothing yet
    assert await _manual_at(repo, stored.id) == NOW
    assert wakes.count == 1


async def test_a_resend_outside_the_webhook_account_or_mode_is_not_found(
    repo: WebhookRepository, ops: DeliveryOperations, wakes: _Wakes
) -> None:
    mine = await _hook(repo)
    other_hook = await _hook(repo)
    theirs = await _hook(repo, account_id="acct_b")
    live = await _hook(repo, mode="live")
    of_other_hook = await _delivery(repo, other_hook, "dead")
    of_other_account = await _delivery(repo, theirs, "dead")
    of_live = await _delivery(repo, live, "dead")
    for stored in (of_other_hook, of_other_account, of_live):
        with pytest.raises(NotFound) as missing:
            await ops.resend(_resend(mine, stored.id))
        assert (missing.value.param, missing.value.code) == ("delivery_id", "resource_missing")
    # Another account's webhook with its own delivery, asked for by this account.
    with pytest.raises(NotFound) as missing:
        await ops.resend(_resend(theirs, of_other_account.id, account_id=mine.account_id))
    assert (missing.value.param, missing.value.code) == (None, "resource_missing")
    assert "webhook" in missing.value.message
    for stored in (of_other_hook, of_other_account, of_live):
        assert await _manual_at(repo, stored.id) is None
    assert wakes.count == 0


async def test_recover_requeues_the_failed_and_dead_deliveries_created_in_the_range(
    repo: WebhookRepository, ops: DeliveryOperations, wakes: _Wakes
) -> None:
    hook = await _hook(repo)
    other = await _hook(repo)
    since, until = NOW - timedelta(hours=2), NOW - timedelta(hours=1)
    inside = [
        await _delivery(repo, hook, "dead", created_at=since),  # the start is included
        await _delivery(repo, hook, "failed", created_at=since + timedelta(minutes=30)),
    ]
    left_alone = [
        await _delivery(repo, hook, "delivered", created_at=since + timedelta(minutes=1)),
        await _delivery(repo, hook, "pending", created_at=since + timedelta(minutes=1)),
        await _delivery(repo, hook, "dead", created_at=until),  # the end is excluded
        await _delivery(repo, hook, "dead", created_at=since - timedelta(milliseconds=1)),
        await _delivery(repo, other, "dead", created_at=since + timedelta(minutes=1)),
    ]
    recovery = await ops.recover(_recover(hook, since, until))
    assert recovery == WebhookRecovery(
        webhook_id=hook.id, since=since, until=until, requeued=2, created_at=NOW
    )
    for stored in inside:
        assert await _manual_at(repo, stored.id) == NOW
    for stored in left_alone:
        assert await _manual_at(repo, stored.id) is None
    assert wakes.count == 1


async def test_recover_without_until_goes_up_to_now_and_wakes_nothing_when_none_match(
    repo: WebhookRepository, ops: DeliveryOperations, wakes: _Wakes
) -> None:
    hook = await _hook(repo)
    recent = await _delivery(repo, hook, "dead", created_at=NOW - timedelta(seconds=1))
    recovery = await ops.recover(_recover(hook, NOW - timedelta(days=1), None))
    assert (recovery.until, recovery.requeued) == (NOW, 1)
    assert await _manual_at(repo, recent.id) == NOW
    empty = await ops.recover(_recover(hook, NOW - timedelta(days=3), NOW - timedelta(days=2)))
    assert empty.requeued == 0
    assert wakes.count == 1


async def test_recover_is_scoped_to_the_account_and_mode_and_refuses_a_reversed_range(
    repo: WebhookRepository, ops: DeliveryOperations
) -> None:
    theirs = await _hook(repo, account_id="acct_b")
    dead = await _delivery(repo, theirs, "dead")
    stranger = _recover(theirs, NOW - timedelta(days=1), None).model_copy(
        update={"account_id": "acct_a"}
    )
    with pytest.raises(NotFound):
        await ops.recover(stranger)
    with pytest.raises(NotFound):
        await ops.recover(stranger.model_copy(update={"account_id": "acct_b", "mode": "live"}))
    assert await _manual_at(repo, dead.id) is None
    with pytest.raises(InvalidRequest) as reversed_range:
        await ops.recover(_recover(theirs, NOW, NOW - timedelta(seconds=1)))
    assert reversed_range.value.param == "until"


async def test_a_disabled_webhook_is_refused_and_nothing_is_marked(
    repo: WebhookRepository, ops: DeliveryOperations, wakes: _Wakes
) -> None:
    hook = await _hook(repo, enabled=False)
    failed = await _delivery(repo, hook, "failed")
    for attempt in (
        ops.resend(_resend(hook, failed.id)),
        ops.recover(_recover(hook, NOW - timedelta(days=1), None)),
    ):
        with pytest.raises(InvalidRequest) as refused:
            await attempt
        assert (refused.value.code, refused.value.param) == ("webhook_disabled", None)
    assert await _manual_at(repo, failed.id) is None
    assert wakes.count == 0


@pytest.fixture
def service(repo: WebhookRepository, ops: DeliveryOperations) -> WebhookService:
    return WebhookService(
        repo,
        SecretBox(Fernet.generate_key().decode()),
        _Clock(),
        allow_private=False,
        max_per_account=50,
        operations=ops,
    )


async def test_the_service_answers_a_replayed_recover_from_its_first_run(
    repo: WebhookRepository, service: WebhookService, wakes: _Wakes
) -> None:
    hook = await _hook(repo)
    dead = await _delivery(repo, hook, "dead")
    command = _recover(hook, NOW - timedelta(days=1), None)
    first = await service.handle(command)
    # Attempted since (the scheduler cleared the request): a replay must not ask again.
    await repo.deliveries.update_one({"_id": dead.id}, {"$set": {"manual_at": None}})
    again = await service.handle(command)
    assert first == again
    assert isinstance(again, WebhookRecovery)
    assert again.requeued == 1
    assert await _manual_at(repo, dead.id) is None
    assert wakes.count == 1
    resent = await service.handle(_resend(hook, dead.id))
    assert isinstance(resent, DeliveryRecord)
    assert resent.manual_at == NOW


async def test_a_replayed_resend_answers_the_delivery_as_it_is_now(
    repo: WebhookRepository, service: WebhookService
) -> None:
    """The record of a resend keeps the delivery's id alone, not its body or the receiver's
    answer (the pass's personal data, which a redaction erases from the delivery itself)."""
    hook = await _hook(repo)
    stored = await _delivery(repo, hook, "delivered", response_body="hello Ada")
    command = _resend(hook, stored.id)
    first = await service.handle(command)
    assert isinstance(first, DeliveryRecord)
    assert first.response_body == "hello Ada"
    kept = await repo.processed.find_one({"_id": command.command_id})
    assert kept is not None
    assert kept["result"] == {"id": stored.id}
    await repo.deliveries.update_one({"_id": stored.id}, {"$set": {"response_body": None}})

    again = await service.handle(command)

    assert isinstance(again, DeliveryRecord)
    assert (again.id, again.response_body, again.manual_at) == (stored.id, None, NOW)
