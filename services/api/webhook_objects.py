"""The webhook objects (spec 2.6, 2.7; docs/webhooks.md): a webhook, the answer that shows its
secret, a delivery and a recovery, as the v1 API answers them and the OpenAPI document
describes them."""

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from shared.clock import iso
from shared.messages import WebhookCreated, WebhookRecovery
from shared.models import DeliveryRecord
from shared.views import WebhookView


def _iso_or_none(moment: datetime | None) -> str | None:
    return None if moment is None else iso(moment)


class WebhookObject(BaseModel):
    id: str = Field(description="Unique identifier, prefix `whk_`.")
    object: Literal["webhook"] = Field("webhook", description="Always `webhook`.")
    url: str = Field(description="Where deliveries are posted.")
    events: list[str] = Field(description="The subscribed webhook event types; `*` for all.")
    description: str | None = Field(description="Your description, or null.")
    enabled: bool = Field(description="Whether deliveries are sent.")
    disabled_reason: Literal["failing"] | None = Field(
        description="`failing` when Tessera disabled the webhook because every attempt "
        "failed for days (docs/webhooks.md#auto-disable); null otherwise."
    )
    disabled_at: str | None = Field(description="When Tessera disabled it; null otherwise.")
    failing_since: str | None = Field(
        description="Since when every attempt has failed; null after a success."
    )
    consecutive_failures: int = Field(description="Failed attempts in a row; 0 after a success.")
    max_deliveries_per_second: int | None = Field(
        description="The webhook's throttle; null for unlimited."
    )
    created_at: str = Field(description="Creation timestamp (ISO 8601, UTC, milliseconds).")

    @classmethod
    def of(cls, view: WebhookView) -> "WebhookObject":
        return cls(
            id=view.id,
            url=view.url,
            events=view.events,
            description=view.description,
            enabled=view.enabled,
            disabled_reason=view.disabled_reason,
            disabled_at=_iso_or_none(view.disabled_at),
            failing_since=_iso_or_none(view.failing_since),
            consecutive_failures=view.consecutive_failures,
            max_deliveries_per_second=view.max_deliveries_per_second,
            created_at=iso(view.created_at),
        )


class WebhookWithSecret(WebhookObject):
    secret: str = Field(
        description="The signing secret (`whsec_...`), shown only when the webhook is "
        "created or its secret rotated."
    )

    @classmethod
    def created(cls, created: WebhookCreated) -> "WebhookWithSecret":
        return cls(**WebhookObject.of(created).model_dump(), secret=created.secret)


class DeliveryObject(BaseModel):
    id: str = Field(description="Unique identifier, prefix `whd_`.")
    object: Literal["webhook_delivery"] = Field(
        "webhook_delivery", description="Always `webhook_delivery`."
    )
    webhook_id: str = Field(description="The webhook it is for.")
    event_type: str = Field(description="The webhook event type delivered.")
    status: Literal["pending", "delivered", "failed", "dead"] = Field(
        description="`pending` (not attempted yet), `delivered`, `failed` (more attempts "
        "follow) or `dead` (no more)."
    )
    attempts: int = Field(description="Attempts made.")
    last_attempt_at: str | None = Field(
        description="When the last attempt started; null before any."
    )
    next_attempt_at: str | None = Field(
        description="When the next attempt is due; null when none is."
    )
    response_status: int | None = Field(
        description="The HTTP status of the last answer; null without one."
    )
    response_body: str | None = Field(
        description="The last answer's body, truncated to 2,000 characters, or why no answer came."
    )
    trigger: Literal["scheduled", "manual"] | None = Field(
        description="What made the last attempt: `scheduled` (the retry schedule) or "
        "`manual` (a resend or recover); null before any."
    )
    created_at: str = Field(description="Creation timestamp (ISO 8601, UTC, milliseconds).")

    @classmethod
    def of(cls, record: DeliveryRecord) -> "DeliveryObject":
        return cls(
            id=record.id,
            webhook_id=record.webhook_id,
            event_type=record.event_type,
            status=record.status,
            attempts=record.attempts,
            last_attempt_at=_iso_or_none(record.last_attempt_at),
            next_attempt_at=_iso_or_none(record.next_attempt_at),
            response_status=record.response_status,
            response_body=record.response_body,
            trigger=record.trigger,
            created_at=iso(record.created_at),
        )


class RecoveryObject(BaseModel):
    """What POST /v1/webhooks/{id}/recover re-queued (docs/webhooks.md#resend-and-recover)."""

    object: Literal["webhook_recovery"] = Field(
        "webhook_recovery", description="Always `webhook_recovery`."
    )
    webhook_id: str = Field(description="The webhook whose deliveries were re-queued.")
    since: str = Field(description="Start of the range (inclusive).")
    until: str = Field(
        description="End of the range (exclusive): the request's time when none was sent."
    )
    requeued: int = Field(description="How many deliveries were re-queued.")
    created_at: str = Field(description="When the recovery was made.")

    @classmethod
    def of(cls, recovery: WebhookRecovery) -> "RecoveryObject":
        return cls(
            webhook_id=recovery.webhook_id,
            since=iso(recovery.since),
            until=iso(recovery.until),
            requeued=recovery.requeued,
            created_at=iso(recovery.created_at),
        )
