"""Signing-secret rotation (docs/webhooks.md#secret-rotation): a new current secret, the one it
replaces still signing for a grace period, and the secrets an attempt signs with.

A rotation is one conditional update on the webhook's current (encrypted) secret, so two
rotations at once never lose a secret: the second one sees the first's result and rotates
again from it. It also stores the command id (`rotated_by`, a field no model reads): a replay
of the command that overtakes the first run's record of it (the api re-sends a command whose
reply timed out) finds its rotation done and answers the same new secret instead of rotating
twice. Replays after that answer from the stored result, which keeps the new secret encrypted
(services/webhooks/service.py).

Expired previous secrets sign nothing (`live_secrets` skips them); each rotation drops them
from the record, and `secret_sweeper` deletes them from every webhook every minute.
"""

import logging
from datetime import datetime, timedelta

from services.webhooks.repository import WebhookRepository
from services.webhooks.secretbox import SecretBox, new_secret
from shared.clock import Clock
from shared.errors import InvalidRequest, not_found
from shared.messages import MAX_GRACE_SECONDS, RotateWebhookSecret
from shared.models import PreviousSecret, WebhookRecord
from shared.mongo import Database
from shared.sweeper import PeriodicSweep

log = logging.getLogger(__name__)

# Every live secret signs every attempt, so their number bounds the signature headers' size: a
# rotation beyond it drops the oldest previous secret before its grace period ends.
MAX_PREVIOUS_SECRETS = 10
SWEEP_SECONDS = 60.0
ROTATED_BY = "rotated_by"
# Each lost race means another rotation committed; a replay of this one ends the loop itself.
_TRIES = 10


def live_secrets(record: WebhookRecord, box: SecretBox, now: datetime) -> list[str]:
    """The secrets an attempt at `now` signs with: the current one, then the previous ones
    whose grace period has not ended, newest first. A previous secret that cannot be decrypted
    (its Fernet key was removed) is skipped with an error log; the current one raises
    ValueError as `SecretBox.open` does, since without it there is nothing to sign with."""
    secrets = [box.open(record.secret_encrypted)]
    for previous in record.previous_secrets:
        if previous.expires_at <= now:
            continue
        try:
            secrets.append(box.open(previous.secret_encrypted))
        except ValueError:
            log.error(
                "webhook %s: a previous signing secret cannot be decrypted; it no longer signs",
                record.id,
            )
    return secrets


def previous_after_rotation(
    record: WebhookRecord, now: datetime, grace_seconds: int, rotated_by: str | None = None
) -> list[PreviousSecret]:
    """The previous secrets once `record`'s current one is replaced at `now`: the replaced one
    first, until now + grace, then the earlier ones still in their grace period. A grace of 0
    keeps none, not even earlier ones (a leaked secret must stop signing at once)."""
    if grace_seconds == 0:
        return []
    replaced = PreviousSecret(
        secret_encrypted=record.secret_encrypted,
        expires_at=now + timedelta(seconds=grace_seconds),
        rotated_by=rotated_by,
    )
    earlier = [previous for previous in record.previous_secrets if previous.expires_at > now]
    return [replaced, *earlier][:MAX_PREVIOUS_SECRETS]


async def rotate(
    repo: WebhookRepository, box: SecretBox, clock: Clock, cmd: RotateWebhookSecret
) -> tuple[WebhookRecord, str]:
    """Rotate the webhook's secret: the webhook as stored after it, and the new secret."""
    grace = cmd.grace_period_seconds
    if not 0 <= grace <= MAX_GRACE_SECONDS:
        raise InvalidRequest(
            f"grace_period_seconds must be 0 to {MAX_GRACE_SECONDS}.",
            param="grace_period_seconds",
            code="parameter_invalid",
        )
    scope = {"_id": cmd.webhook_id, "account_id": cmd.account_id, "mode": cmd.mode}
    for _ in range(_TRIES):
        doc = await repo.webhooks.find_one(scope)
        if doc is None:
            raise not_found("webhook", cmd.webhook_id)
        record = WebhookRecord.model_validate(doc)
        if doc.get(ROTATED_BY) == cmd.command_id:
            # This command's rotation is done (its first run had not recorded the command yet).
            return record, box.open(record.secret_encrypted)
        for previous in record.previous_secrets:
            if previous.rotated_by == cmd.command_id and previous.expires_at > clock.now():
                # Done, and another rotation came since: its secret still signs, and is the
                # answer (rotating again would make a third one nobody asked for).
                return record, box.open(previous.secret_encrypted)
        secret = new_secret()
        now = clock.now()
        rotated = record.model_copy(
            update={
                "secret_encrypted": box.seal(secret),
                "previous_secrets": previous_after_rotation(
                    record, now, grace, rotated_by=doc.get(ROTATED_BY)
                ),
                "updated_at": now,
            }
        )
        fields = rotated.model_dump(include={"secret_encrypted", "previous_secrets", "updated_at"})
        written = await repo.webhooks.update_one(
            {**scope, "secret_encrypted": record.secret_encrypted},
            {"$set": {**fields, ROTATED_BY: cmd.command_id}},
        )
        if written.modified_count == 1:
            return rotated, secret
        # Another rotation, or a replay of this one, changed the secret since it was read.
    raise RuntimeError(f"webhook {cmd.webhook_id}: no rotation won in {_TRIES} tries")


async def prune_expired_secrets(db: Database, now: datetime) -> int:
    """Delete the previous secrets whose grace period ended by `now` from every webhook, with
    one update; answers how many webhooks had some."""
    expired = {"expires_at": {"$lte": now}}
    result = await db["webhooks"].update_many(
        {"previous_secrets": {"$elemMatch": expired}}, {"$pull": {"previous_secrets": expired}}
    )
    return result.modified_count


def secret_sweeper(
    db: Database, clock: Clock, every_seconds: float = SWEEP_SECONDS
) -> PeriodicSweep:
    """Runs `prune_expired_secrets` every `every_seconds`. Any replica may run it: the update
    is idempotent."""

    async def sweep() -> int:
        return await prune_expired_secrets(db, clock.now())

    return PeriodicSweep(
        "webhook-secret-sweeper",
        sweep,
        every_seconds,
        "deleted expired previous signing secrets of %d webhooks",
    )
