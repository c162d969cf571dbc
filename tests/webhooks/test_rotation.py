"""Secret rotation against a real MongoDB-wire store: what signs during and after the grace
period, a grace of 0, replays of one rotation (in turn and on two replicas at once), two
rotations at once, undecryptable old secrets, the sweep of expired ones, and the webhook
fields a PATCH sets or clears."""

import asyncio
import ipaddress
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from cryptography.fernet import Fernet

from services.webhooks.repository import WebhookRepository
from services.webhooks.rotation import (
    MAX_PREVIOUS_SECRETS,
    live_secrets,
    prune_expired_secrets,
    secret_sweeper,
)
from services.webhooks.secretbox import SecretBox
from services.webhooks.service import WebhookService
from services.webhooks.targets import IPAddress
from shared.errors import InvalidRequest, NotFound
from shared.ids import new_id
from shared.messages import (
    CreateWebhook,
    RotateWebhookSecret,
    UpdateWebhook,
    WebhookCreated,
    webhooks_command_adapter,
)
from shared.models import PreviousSecret, WebhookRecord
from shared.views import WebhookView

BOX = SecretBox(Fernet.generate_key().decode())
START = datetime(2030, 1, 1, tzinfo=UTC)


class MovableClock:
    def __init__(self) -> None:
        self.moment = START

    def now(self) -> datetime:
        return self.moment


async def _public_dns(host: str, port: int) -> list[IPAddress]:
    return [ipaddress.ip_address("93.184.216.34")]


def _service(repo: WebhookRepository, clock: MovableClock) -> WebhookService:
    return WebhookService(
        repo, BOX, clock, allow_private=False, max_per_account=50, resolver=_public_dns
    )


def _base(**fields: Any) -> dict[str, Any]:
    return {"command_id": new_id("command"), "account_id": "acct_a", "mode": "test", **fields}


async def _create(service: WebhookService, **fields: Any) -> WebhookCreated:
    command = CreateWebhook.model_validate(
        _base(url="https://hooks.example.com/in", events=["*"], **fields)
    )
    created = await service.handle(command)
    assert isinstance(created, WebhookCreated)
    return created


def _rotation(webhook_id: str, grace: int, **fields: Any) -> RotateWebhookSecret:
    return RotateWebhookSecret.model_validate(
        _base(webhook_id=webhook_id, grace_period_seconds=grace, **fields)
    )


async def _rotate(service: WebhookService, webhook_id: str, grace: int) -> str:
    rotated = await service.handle(_rotation(webhook_id, grace))
    assert isinstance(rotated, WebhookCreated)
    assert rotated.id == webhook_id
    return rotated.secret


async def _record(repo: WebhookRepository, webhook_id: str) -> WebhookRecord:
    record = await repo.by_id(webhook_id)
    assert record is not None
    return record


async def _live(repo: WebhookRepository, webhook_id: str, at: datetime) -> list[str]:
    return live_secrets(await _record(repo, webhook_id), BOX, at)


async def test_the_old_secret_signs_until_its_grace_period_ends(repo: WebhookRepository) -> None:
    clock = MovableClock()
    service = _service(repo, clock)
    hook = await _create(service)
    new = await _rotate(service, hook.id, 3600)
    assert new != hook.secret
    assert new.startswith("whsec_")
    record = await _record(repo, hook.id)
    assert [p.expires_at for p in record.previous_secrets] == [START + timedelta(hours=1)]
    assert await _live(repo, hook.id, START) == [new, hook.secret]
    assert await _live(repo, hook.id, START + timedelta(seconds=3599)) == [new, hook.secret]
    assert await _live(repo, hook.id, START + timedelta(hours=1)) == [new]
    # Stored encrypted like the current one.
    assert hook.secret not in str(await repo.webhooks.find_one({"_id": hook.id}))


async def test_rotations_keep_every_secret_in_its_grace_newest_first_and_prune_expired(
    repo: WebhookRepository,
) -> None:
    clock = MovableClock()
    service = _service(repo, clock)
    hook = await _create(service)
    second = await _rotate(service, hook.id, 600)
    clock.moment += timedelta(seconds=60)
    third = await _rotate(service, hook.id, 7 * 86400)
    assert await _live(repo, hook.id, clock.moment) == [third, second, hook.secret]
    clock.moment += timedelta(seconds=600)  # the first secret's grace has ended
    fourth = await _rotate(service, hook.id, 60)
    record = await _record(repo, hook.id)
    assert len(record.previous_secrets) == 2  # the expired one was dropped by the rotation
    assert live_secrets(record, BOX, clock.moment) == [fourth, third, second]


async def test_a_grace_of_zero_drops_every_earlier_secret_at_once(
    repo: WebhookRepository,
) -> None:
    clock = MovableClock()
    service = _service(repo, clock)
    hook = await _create(service)
    await _rotate(service, hook.id, 86400)
    leaked_free = await _rotate(service, hook.id, 0)
    assert await _live(repo, hook.id, clock.moment) == [leaked_free]
    assert (await _record(repo, hook.id)).previous_secrets == []


async def test_previous_secrets_are_bounded(repo: WebhookRepository) -> None:
    clock = MovableClock()
    service = _service(repo, clock)
    hook = await _create(service)
    made = [hook.secret] + [await _rotate(service, hook.id, 3600) for _ in range(12)]
    live = await _live(repo, hook.id, clock.moment)
    assert live == list(reversed(made))[: MAX_PREVIOUS_SECRETS + 1]


async def test_a_replayed_rotation_answers_the_same_secret_and_rotates_once(
    repo: WebhookRepository,
) -> None:
    clock = MovableClock()
    service = _service(repo, clock)
    hook = await _create(service)
    command = _rotation(hook.id, 3600)
    first = await service.handle(command)
    assert isinstance(first, WebhookCreated)
    newer = await _rotate(service, hook.id, 3600)  # the record now holds a newer secret
    again = await _service(repo, clock).handle(command)
    assert again == first
    assert await _live(repo, hook.id, clock.moment) == [newer, first.secret, hook.secret]
    # The stored copy of the answer keeps the secret encrypted only.
    stored = await repo.processed.find_one({"_id": command.command_id})
    assert first.secret not in str(stored)


async def test_a_rotation_replayed_after_another_one_answers_its_own_secret(
    repo: WebhookRepository,
) -> None:
    """The first run rotated but died before recording its command; another rotation came;
    the client's retry (same command) rotated a third time, and with a grace of 0 dropped
    the second's secret too: signing with one nobody was shown."""
    clock = MovableClock()
    hook = await _create(_service(repo, clock))
    command = _rotation(hook.id, 0)
    first = await _service(repo, clock).handle(command)
    assert isinstance(first, WebhookCreated)
    await repo.processed.delete_many({"_id": command.command_id})  # died before recording
    newer = await _rotate(_service(repo, clock), hook.id, 3600)
    again = await _service(repo, clock).handle(command)
    assert isinstance(again, WebhookCreated)
    assert again.secret == first.secret
    assert await _live(repo, hook.id, clock.moment) == [newer, first.secret]


class _BothChecked(WebhookRepository):
    """Both replicas have looked for a stored result, and found none, before either rotates
    (the api re-sent a command whose reply timed out while the first run was under way)."""

    def __init__(self, repo: WebhookRepository, barrier: asyncio.Barrier):
        super().__init__(repo.webhooks.database)
        self._barrier: asyncio.Barrier | None = barrier

    async def processed_result(self, command_id: str) -> dict[str, Any] | None:
        found = await super().processed_result(command_id)
        if self._barrier is not None:
            barrier, self._barrier = self._barrier, None
            await barrier.wait()
        return found


async def test_a_rotation_replayed_on_two_replicas_at_once_rotates_once(
    repo: WebhookRepository,
) -> None:
    clock = MovableClock()
    hook = await _create(_service(repo, clock))
    barrier = asyncio.Barrier(2)
    replicas = [_service(_BothChecked(repo, barrier), clock) for _ in range(2)]
    command = _rotation(hook.id, 3600)
    first, second = await asyncio.gather(*(replica.handle(command) for replica in replicas))
    assert isinstance(first, WebhookCreated)
    assert isinstance(second, WebhookCreated)
    assert first.secret == second.secret
    assert await _live(repo, hook.id, clock.moment) == [first.secret, hook.secret]


async def test_two_rotations_at_once_lose_no_secret(repo: WebhookRepository) -> None:
    clock = MovableClock()
    hook = await _create(_service(repo, clock))
    barrier = asyncio.Barrier(2)
    replicas = [_service(_BothChecked(repo, barrier), clock) for _ in range(2)]
    answers = await asyncio.gather(
        *(replica.handle(_rotation(hook.id, 3600)) for replica in replicas)
    )
    secrets = {answer.secret for answer in answers if isinstance(answer, WebhookCreated)}
    assert len(secrets) == 2
    live = await _live(repo, hook.id, clock.moment)
    assert len(live) == 3
    assert set(live) == secrets | {hook.secret}


async def test_an_undecryptable_previous_secret_is_skipped_with_an_error_log(
    repo: WebhookRepository, caplog: pytest.LogCaptureFixture
) -> None:
    clock = MovableClock()
    service = _service(repo, clock)
    hook = await _create(service)
    new = await _rotate(service, hook.id, 3600)
    record = await _record(repo, hook.id)
    other_key = SecretBox(Fernet.generate_key().decode())
    lost = PreviousSecret(
        secret_encrypted=other_key.seal("whsec_lost"), expires_at=START + timedelta(hours=1)
    )
    record = record.model_copy(update={"previous_secrets": [lost, *record.previous_secrets]})
    with caplog.at_level(logging.ERROR, logger="services.webhooks.rotation"):
        assert live_secrets(record, BOX, START) == [new, hook.secret]
    assert [r.levelno for r in caplog.records] == [logging.ERROR]
    assert hook.id in caplog.records[0].getMessage()
    assert caplog.records[0].exc_info is None


async def test_bad_grace_periods_and_other_accounts_are_refused(repo: WebhookRepository) -> None:
    clock = MovableClock()
    service = _service(repo, clock)
    hook = await _create(service)
    for grace in (-1, 604_801):
        with pytest.raises(InvalidRequest) as refused:
            await service.handle(_rotation(hook.id, grace))
        assert refused.value.param == "grace_period_seconds"
    with pytest.raises(NotFound):
        await service.handle(_rotation(hook.id, 60, account_id="acct_b"))
    assert await _live(repo, hook.id, clock.moment) == [hook.secret]


async def _with_previous(repo: WebhookRepository, *expiries: datetime) -> str:
    hook = await _create(_service(repo, MovableClock()))
    previous = [
        PreviousSecret(secret_encrypted=BOX.seal(f"whsec_{i}"), expires_at=at).model_dump()
        for i, at in enumerate(expiries)
    ]
    await repo.webhooks.update_one({"_id": hook.id}, {"$set": {"previous_secrets": previous}})
    return hook.id


async def _expiries(repo: WebhookRepository, webhook_id: str) -> list[datetime]:
    return [p.expires_at for p in (await _record(repo, webhook_id)).previous_secrets]


async def test_the_sweep_deletes_expired_previous_secrets_from_every_webhook(
    repo: WebhookRepository,
) -> None:
    later, earlier = START + timedelta(hours=1), START - timedelta(seconds=1)
    mixed = await _with_previous(repo, later, earlier, START)
    expired = await _with_previous(repo, earlier)
    current = await _with_previous(repo, later)
    untouched = await _with_previous(repo)
    db = repo.webhooks.database
    assert await prune_expired_secrets(db, START) == 2
    assert await _expiries(repo, mixed) == [later]
    assert await _expiries(repo, expired) == []
    assert await _expiries(repo, current) == [later]
    assert await _expiries(repo, untouched) == []
    assert await prune_expired_secrets(db, START) == 0


class _SweepsCounted(MovableClock):
    """The sweeper reads the clock once per sweep: a second read means the first is done."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0
        self.second_sweep = asyncio.Event()

    def now(self) -> datetime:
        self.reads += 1
        if self.reads == 2:
            self.second_sweep.set()
        return super().now()


async def test_the_sweeper_sweeps_at_once_and_again_periodically(
    repo: WebhookRepository,
) -> None:
    expired = await _with_previous(repo, START - timedelta(seconds=1))
    clock = _SweepsCounted()
    sweeper = secret_sweeper(repo.webhooks.database, clock, every_seconds=0.05)
    sweeper.start()
    try:
        await asyncio.wait_for(clock.second_sweep.wait(), 10)
    finally:
        await sweeper.stop()
    assert await _expiries(repo, expired) == []


async def _update(service: WebhookService, webhook_id: str, **fields: Any) -> WebhookView:
    """A PATCH as the api sends it: through JSON, as it crosses NATS (every field in it)."""
    command = UpdateWebhook.model_validate(_base(webhook_id=webhook_id, **fields))
    updated = await service.handle(
        webhooks_command_adapter.validate_json(command.model_dump_json())
    )
    assert isinstance(updated, WebhookView)
    return updated


async def test_max_deliveries_per_second_and_description_are_set_kept_and_cleared(
    repo: WebhookRepository,
) -> None:
    service = _service(repo, MovableClock())
    hook = await _create(service, max_deliveries_per_second=5, description="CRM")
    assert hook.max_deliveries_per_second == 5
    kept = await _update(service, hook.id, events=["pass.voided"])
    assert (kept.max_deliveries_per_second, kept.description) == (5, "CRM")
    changed = await _update(service, hook.id, max_deliveries_per_second=9)
    assert (changed.max_deliveries_per_second, changed.description) == (9, "CRM")
    nulls = ["max_deliveries_per_second", "description"]
    cleared = await _update(service, hook.id, nulls=nulls)
    assert (cleared.max_deliveries_per_second, cleared.description) == (None, None)
    stored = await _record(repo, hook.id)
    assert (stored.max_deliveries_per_second, stored.description) == (None, None)


async def test_enabling_a_disabled_webhook_clears_its_reason_and_failure_streak(
    repo: WebhookRepository,
) -> None:
    service = _service(repo, MovableClock())
    hook = await _create(service)
    failing = {
        "enabled": False,
        "disabled_reason": "failing",
        "disabled_at": START,
        "failing_since": START - timedelta(days=5),
        "consecutive_failures": 40,
    }
    await repo.webhooks.update_one({"_id": hook.id}, {"$set": failing})
    still = await _update(service, hook.id, description="still off")
    assert (still.disabled_reason, still.consecutive_failures) == ("failing", 40)
    enabled = await _update(service, hook.id, enabled=True)
    assert enabled.enabled is True
    assert (enabled.disabled_reason, enabled.disabled_at, enabled.failing_since) == (None,) * 3
    assert enabled.consecutive_failures == 0
    stored = await _record(repo, hook.id)
    assert (stored.disabled_reason, stored.failing_since, stored.consecutive_failures) == (
        None,
        None,
        0,
    )


async def test_disabling_an_auto_disabled_webhook_makes_it_the_accounts_own_disable(
    repo: WebhookRepository,
) -> None:
    """It then counts as auto-disabled no more and gets no dead delivery per event
    (docs/webhooks.md#auto-disable): the reason said "failing" until it was enabled again."""
    service = _service(repo, MovableClock())
    hook = await _create(service)
    failing = {"enabled": False, "disabled_reason": "failing", "disabled_at": START}
    await repo.webhooks.update_one({"_id": hook.id}, {"$set": failing})
    assert await repo.count_auto_disabled() == 1
    off = await _update(service, hook.id, enabled=False)
    assert (off.enabled, off.disabled_reason, off.disabled_at) == (False, None, START)
    assert await repo.count_auto_disabled() == 0
    assert await repo.deliverable(hook.account_id, hook.mode) == []
