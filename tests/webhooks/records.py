"""Webhook and delivery records for the webhooks service's unit tests."""

from datetime import UTC, datetime
from typing import Any

from shared.ids import new_id
from shared.messages import PassEventMessage
from shared.models import DeliveryRecord, PassSnapshot, WebhookRecord


def webhook(**overrides: Any) -> WebhookRecord:
    now = datetime.now(UTC)
    fields: dict[str, Any] = {
        "_id": new_id("webhook"),
        "account_id": "acct_a",
        "mode": "test",
        "url": "http://127.0.0.1:9/hook",
        "events": ["*"],
        "enabled": True,
        "secret_encrypted": "sealed",
        "created_at": now,
        "updated_at": now,
    }
    return WebhookRecord.model_validate(fields | overrides)


def delivery(**overrides: Any) -> DeliveryRecord:
    now = datetime.now(UTC)
    fields: dict[str, Any] = {
        "_id": new_id("webhook_delivery"),
        "account_id": "acct_a",
        "mode": "test",
        "created_at": now,
        "webhook_id": "whk_a",
        "event_id": new_id("pass_event"),
        "event_type": "pass.issued",
        "payload": "{}",
        "next_attempt_at": now,
    }
    return DeliveryRecord.model_validate(fields | overrides)


def event(event_type: str = "created", **overrides: Any) -> PassEventMessage:
    pass_id = new_id("pass")
    fields: dict[str, Any] = {
        "id": new_id("pass_event"),
        "account_id": "acct_a",
        "mode": "test",
        "pass_id": pass_id,
        "event_type": event_type,
        "created_at": datetime.now(UTC),
        "pass_snapshot": PassSnapshot(
            id=pass_id,
            short_id="abc",
            mode=overrides.get("mode", "test"),
            holder_email=None,
            holder_name=None,
            field_values={},
            voided=event_type == "voided",
        ),
    }
    return PassEventMessage.model_validate(fields | overrides)
