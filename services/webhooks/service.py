"""Subscriptions: create, update and delete webhooks, each command idempotent by command_id.

The signing secret is made here and returned only by create and by a rotation
(services/webhooks/rotation.py). A create or a rotation that is retried after a timeout (same
command_id) answers the same webhook with the same secret, decrypted again: the first answer
never reached the client, so it must still be able to learn the secret.

An account has at most `max_per_account` webhooks per mode: each webhook takes one of the
account and mode's numbered slots, unique in MongoDB (services/webhooks/repository.py), so the
cap is exact under concurrent creates on any number of replicas. A replayed create answers its
first webhook and takes no second slot; a delete frees the slot with the webhook.
"""

from typing import Any

from pydantic import BaseModel

from services.webhooks import rotation
from services.webhooks.operations import DeliveryOperations
from services.webhooks.quiet_scopes import QuietScopes
from services.webhooks.repository import WebhookRepository
from services.webhooks.secretbox import SecretBox, new_secret
from services.webhooks.targets import Resolve, UnsafeTarget, check_target, resolve
from shared.clock import Clock
from shared.errors import InvalidRequest, not_found
from shared.ids import new_id
from shared.messages import (
    CreateWebhook,
    Deleted,
    DeleteWebhook,
    RecoverDeliveries,
    ResendDelivery,
    RotateWebhookSecret,
    UpdateWebhook,
    WebhookCreated,
    WebhooksCommand,
)
from shared.models import WebhookRecord
from shared.urls import url_characters_problem
from shared.views import WebhookView

# An update re-reads and tries again when the webhook was enabled or disabled meanwhile.
_UPDATE_TRIES = 5


class WebhookService:
    def __init__(
        self,
        repo: WebhookRepository,
        box: SecretBox,
        clock: Clock,
        *,
        allow_private: bool,
        max_per_account: int,
        resolver: Resolve = resolve,
        operations: DeliveryOperations | None = None,
        quiet: QuietScopes | None = None,
    ):
        self._repo = repo
        # Scopes known to have no webhook (services/webhooks/quiet_scopes.py): forgotten on
        # every replica before a create or an update answers.
        self._quiet = quiet
        # Resend and recover; without one given (tests of subscriptions alone), one that
        # leaves the manual attempts to the scheduler's next poll.
        self._operations = operations or DeliveryOperations(
            repo.deliveries.database, clock, wake=lambda: None
        )
        self._box = box
        self._clock = clock
        self._allow_private = allow_private
        self._max_per_account = max_per_account
        self._resolver = resolver

    async def handle(self, command: WebhooksCommand) -> BaseModel:
        result = await self._handle(command)
        if self._quiet is not None and isinstance(command, CreateWebhook | UpdateWebhook):
            # Also on a replay: the first run may have stopped between its write and this.
            await self._quiet.changed(command.account_id, command.mode)
        return result

    async def _handle(self, command: WebhooksCommand) -> BaseModel:
        stored = await self._repo.processed_result(command.command_id)
        if stored is not None:
            return await self._replayed(command, stored)
        result: BaseModel
        match command:
            case CreateWebhook():
                result = await self._create(command)
            case UpdateWebhook():
                result = await self._update(command)
            case DeleteWebhook():
                result = await self._delete(command)
            case ResendDelivery() | RecoverDeliveries():
                result = await self._operations.handle(command)
            case RotateWebhookSecret():
                result = await self._rotate(command)
        # A secret is never stored outside its encrypted form, not even for replays.
        kept = result.model_dump(mode="json", exclude={"secret"})
        if isinstance(command, ResendDelivery):
            # Its id alone: the delivery (its body, the receiver's answer) holds the pass's
            # personal data, which a redaction erases from the delivery (docs/privacy.md).
            kept = {"id": kept["id"]}
        if isinstance(result, WebhookCreated) and isinstance(command, RotateWebhookSecret):
            # A replay must answer this rotation's secret, and the record may hold a newer one.
            kept["secret_encrypted"] = self._box.seal(result.secret)
        if not await self._repo.record_command(command.command_id, kept, self._clock.now()):
            stored = await self._repo.processed_result(command.command_id)
            return result if stored is None else await self._replayed(command, stored)
        return result

    async def _replayed(self, command: WebhooksCommand, stored: dict[str, Any]) -> BaseModel:
        if isinstance(command, ResendDelivery):  # the delivery as it is now
            delivery = await self._repo.delivery(stored["id"])
            if delivery is None:  # deleted with its webhook since
                raise not_found("webhook delivery", stored["id"], "delivery_id")
            return delivery
        if isinstance(command, RotateWebhookSecret):
            secret = self._box.open(stored["secret_encrypted"])
            return WebhookCreated.model_validate({**stored, "secret": secret})
        if not isinstance(command, CreateWebhook):
            return command.parse_result(stored)
        # The first answer never reached the client: it must still be able to learn the secret.
        record = await self._repo.by_id(stored["id"])
        if record is None:  # deleted since
            raise not_found("webhook", stored["id"])
        return _created(record, self._box.open(record.secret_encrypted))

    async def _checked_url(self, url: str) -> str:
        try:
            if (problem := url_characters_problem(url)) is not None:
                raise UnsafeTarget(problem)
            await check_target(url, allow_private=self._allow_private, resolver=self._resolver)
        except UnsafeTarget as exc:
            raise InvalidRequest(f"Invalid url: {exc}.", param="url", code="url_invalid") from exc
        return url

    async def _create(self, cmd: CreateWebhook) -> WebhookCreated:
        url = await self._checked_url(cmd.url)
        secret = new_secret()
        now = self._clock.now()
        record = WebhookRecord.model_validate(
            {
                "_id": new_id("webhook"),
                "account_id": cmd.account_id,
                "mode": cmd.mode,
                "url": url,
                "events": list(dict.fromkeys(cmd.events)),
                "description": cmd.description,
                "enabled": cmd.enabled,
                "max_deliveries_per_second": cmd.max_deliveries_per_second,
                "secret_encrypted": self._box.seal(secret),
                "created_at": now,
                "updated_at": now,
            }
        )
        # Each lost race for a slot means another create took it, so the tries are bounded by
        # the slots there are (and one more for the answer that the cap is reached).
        for _ in range(self._max_per_account + 1):
            slot = await self._repo.free_slot(cmd.account_id, cmd.mode, self._max_per_account)
            if slot is None:
                # A replay of this command may have taken the last slot: its webhook answers.
                if (first := await self._repo.by_command(cmd.command_id)) is not None:
                    return _created(first, self._box.open(first.secret_encrypted))
                raise InvalidRequest(
                    f"This account already has {self._max_per_account} webhooks in {cmd.mode} "
                    f"mode, the most it may have; delete one to create another.",
                    code="webhook_limit_reached",
                )
            match await self._repo.insert(record, cmd.command_id, slot):
                case "inserted":
                    return _created(record, secret)
                case "duplicate_command":
                    # A replay of this command on another replica created the webhook first
                    # (the api re-sends a command whose reply timed out): that one is the
                    # answer, not a second.
                    first = await self._repo.by_command(cmd.command_id)
                    if first is None:  # deleted since: nothing to answer with but an error
                        raise RuntimeError(f"webhook of command {cmd.command_id} vanished")
                    return _created(first, self._box.open(first.secret_encrypted))
                case "slot_taken":
                    continue
        raise RuntimeError(f"no webhook slot could be taken for command {cmd.command_id}")

    async def _existing(self, cmd: UpdateWebhook | DeleteWebhook) -> WebhookRecord:
        record = await self._repo.get(cmd.account_id, cmd.mode, cmd.webhook_id)
        if record is None:
            raise not_found("webhook", cmd.webhook_id)
        return record

    async def _update(self, cmd: UpdateWebhook) -> WebhookView:
        # Written only if `enabled` is still as read: an auto-disable committing between the
        # read and the write made an `enabled: true` set that alone, leaving the webhook
        # enabled with its `disabled_reason` and failure streak (disabled again at once).
        for _ in range(_UPDATE_TRIES):
            record = await self._existing(cmd)
            changes = await self._changes(cmd, record)
            if await self._repo.update_fields(record.id, changes, enabled=record.enabled):
                return _public(record.model_copy(update=changes))
        raise RuntimeError(f"webhook {cmd.webhook_id} kept changing under its update")

    async def _changes(self, cmd: UpdateWebhook, record: WebhookRecord) -> dict[str, Any]:
        sent = {"events", "enabled", "description", "max_deliveries_per_second"}
        changes: dict[str, Any] = cmd.model_dump(include=sent, exclude_none=True)
        changes |= dict.fromkeys(cmd.nulls)
        if cmd.enabled and not record.enabled:
            # Enabled again by the account: whatever disabled it, and its failure streak, are
            # history (docs/webhooks.md#auto-disable).
            changes |= {
                "disabled_reason": None,
                "disabled_at": None,
                "failing_since": None,
                "consecutive_failures": 0,
            }
        elif cmd.enabled is False and record.disabled_reason is not None:
            # Disabled by the account now: no longer counted as auto-disabled, and nothing is
            # queued for it any more (disabled_at stays: when it stopped receiving).
            changes["disabled_reason"] = None
        if cmd.url is not None:
            changes["url"] = await self._checked_url(cmd.url)
        if "events" in changes:
            changes["events"] = list(dict.fromkeys(changes["events"]))
        changes["updated_at"] = self._clock.now()
        # Only what this update changes is written: a rotation or an attempt's health
        # recorded meanwhile stays.
        return changes

    async def _rotate(self, cmd: RotateWebhookSecret) -> WebhookCreated:
        return _created(*await rotation.rotate(self._repo, self._box, self._clock, cmd))

    async def _delete(self, cmd: DeleteWebhook) -> Deleted:
        record = await self._existing(cmd)
        await self._repo.delete(record.id)
        return Deleted(id=record.id)


def _public(record: WebhookRecord) -> WebhookView:
    """The record as it may cross NATS: everything but the encrypted secrets."""
    return WebhookView.model_validate(
        record.model_dump(exclude={"secret_encrypted", "previous_secrets"})
    )


def _created(record: WebhookRecord, secret: str) -> WebhookCreated:
    """A create's or a rotation's answer: the only ones that carry the secret."""
    return WebhookCreated.model_validate({**_public(record).model_dump(), "secret": secret})
