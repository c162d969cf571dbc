"""The spec's objects (section 2): one model per object, which endpoints build their bodies
with (`PassObject.of(record, site_url)`) and which the OpenAPI document describes them by.
"""

from datetime import datetime
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from services.api.bundle_objects import PassBundleObject
from services.api.scan_objects import RedemptionObject
from shared.clock import iso
from shared.messages import WebhookCreated, WebhookRecovery
from shared.models import (
    DeliveryRecord,
    DownloadLinkRecord,
    JobError,
    JobRecord,
    Mode,
    PassEventRecord,
    PassRecord,
    RowError,
    TemplateRecord,
)
from shared.redemption import remaining
from shared.views import DeviceLogView, WebhookView

T = TypeVar("T")


def _iso_or_none(moment: datetime | None) -> str | None:
    return None if moment is None else iso(moment)


def pass_urls(site_url: str, short_id: str) -> tuple[str, str]:
    """A pass's landing page and its .pkpass download under {site_url}."""
    page = f"{site_url}/p/{short_id}"
    return page, f"{page}/pass.pkpass"


class ErrorBody(BaseModel):
    type: str
    code: str | None
    message: str
    param: str | None


class ErrorEnvelope(BaseModel):
    error: ErrorBody


class TemplateObject(BaseModel):
    id: str
    object: Literal["template"] = "template"
    name: str
    type: str
    apple_style: str
    design: dict[str, Any]
    archived: bool
    require_download_link: bool
    # 1, +1 on every change of `design`; the job rolling the current one out to the passes.
    design_version: int
    rollout_job_id: str | None
    # The effective policy: the defaults of the template's type filled in.
    redemption: RedemptionObject
    created_at: str
    updated_at: str

    @classmethod
    def of(cls, record: TemplateRecord) -> "TemplateObject":
        return cls(
            id=record.id,
            name=record.name,
            type=record.type,
            apple_style=record.apple_style,
            design=record.design,
            archived=record.archived,
            require_download_link=record.require_download_link,
            design_version=record.design_version,
            rollout_job_id=record.rollout_job_id,
            redemption=RedemptionObject.of(record.policy()),
            created_at=iso(record.created_at),
            updated_at=iso(record.updated_at),
        )


class PassObject(BaseModel):
    id: str
    object: Literal["pass"] = "pass"
    short_id: str
    template_id: str
    serial_number: str
    mode: Mode
    holder_email: str | None
    holder_name: str | None
    field_values: dict[str, str]
    voided: bool
    voided_at: str | None
    metadata: dict[str, Any]
    created_via_api: bool
    # The template's design_version the pass's current file was built from.
    design_version: int
    # Accepted scans, the last one's time, and how many more are allowed (null: unlimited).
    redemption_count: int
    last_redeemed_at: str | None
    redemptions_remaining: int | None
    # With Google credentials, where the pass's object is at Google: "pending", "synced" or
    # "failing" (retried); null without them (docs/google-wallet.md#the-google-step).
    google_status: str | None
    url: str
    download_url: str
    created_at: str

    @classmethod
    def of(cls, record: PassRecord, site_url: str) -> "PassObject":
        url, download_url = pass_urls(site_url, record.short_id)
        return cls(
            id=record.id,
            short_id=record.short_id,
            template_id=record.template_id,
            serial_number=record.serial_number,
            mode=record.mode,
            holder_email=record.holder_email,
            holder_name=record.holder_name,
            field_values=record.field_values,
            voided=record.voided,
            voided_at=_iso_or_none(record.voided_at),
            metadata=record.metadata,
            created_via_api=record.created_via_api,
            design_version=record.design_version,
            redemption_count=record.redemption_count,
            last_redeemed_at=_iso_or_none(record.last_redeemed_at),
            redemptions_remaining=remaining(record.redemption_count, record.redemption_limit),
            google_status=record.google_status,
            url=url,
            download_url=download_url,
            created_at=iso(record.created_at),
        )


class PassEventObject(BaseModel):
    id: str
    object: Literal["pass_event"] = "pass_event"
    pass_id: str
    type: str
    metadata: dict[str, Any]
    created_at: str

    @classmethod
    def of(cls, record: PassEventRecord) -> "PassEventObject":
        return cls(
            id=record.id,
            pass_id=record.pass_id,
            type=record.type,
            metadata=record.metadata,
            created_at=iso(record.created_at),
        )


class DownloadLinkObject(BaseModel):
    object: Literal["pass.download_link"] = "pass.download_link"
    pass_id: str
    url: str
    expires_in: int
    expires_at: str
    created_at: str

    @classmethod
    def of(cls, record: DownloadLinkRecord, url: str) -> "DownloadLinkObject":
        return cls(
            pass_id=record.pass_id,
            url=url,
            expires_in=record.expires_in,
            expires_at=iso(record.expires_at),
            created_at=iso(record.created_at),
        )


class WebhookObject(BaseModel):
    id: str
    object: Literal["webhook"] = "webhook"
    url: str
    events: list[str]
    description: str | None
    enabled: bool
    # "failing" when Tessera disabled it (docs/webhooks.md#auto-disable), and when; null else.
    disabled_reason: Literal["failing"] | None
    disabled_at: str | None
    # Since when every attempt has failed, and how many in a row; null and 0 after a success.
    failing_since: str | None
    consecutive_failures: int
    max_deliveries_per_second: int | None
    created_at: str

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
    secret: str

    @classmethod
    def created(cls, created: WebhookCreated) -> "WebhookWithSecret":
        return cls(**WebhookObject.of(created).model_dump(), secret=created.secret)


class DeliveryObject(BaseModel):
    id: str
    object: Literal["webhook_delivery"] = "webhook_delivery"
    webhook_id: str
    event_type: str
    status: Literal["pending", "delivered", "failed", "dead"]
    attempts: int
    last_attempt_at: str | None
    next_attempt_at: str | None
    response_status: int | None
    response_body: str | None
    # What made the last attempt: the retry schedule or a resend/recover; null before any.
    trigger: Literal["scheduled", "manual"] | None
    created_at: str

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

    object: Literal["webhook_recovery"] = "webhook_recovery"
    webhook_id: str
    since: str
    until: str
    requeued: int
    created_at: str

    @classmethod
    def of(cls, recovery: WebhookRecovery) -> "RecoveryObject":
        return cls(
            webhook_id=recovery.webhook_id,
            since=iso(recovery.since),
            until=iso(recovery.until),
            requeued=recovery.requeued,
            created_at=iso(recovery.created_at),
        )


class _Sparse(BaseModel):
    """An object whose absent parts are left out rather than null (a row has a pass or an
    error, never both)."""

    model_config = ConfigDict(serialize_by_alias=True, populate_by_name=True)

    @model_serializer(mode="wrap")
    def _present(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        return {key: value for key, value in data.items() if value is not None}


def error_body(error: RowError) -> ErrorBody:
    return ErrorBody(type=error.type, code=error.code, message=error.message, param=error.param)


class BatchRowObject(_Sparse):
    index: int
    status: int
    pass_object: PassObject | None = Field(None, alias="pass")
    error: ErrorBody | None = None


class BatchObject(BaseModel):
    object: Literal["batch"] = "batch"
    data: list[BatchRowObject]
    # With `bundle: true`, the bundle of the passes made; null otherwise, or when none was.
    bundle: PassBundleObject | None = None


class JobErrorObject(_Sparse):
    row: int | None = None
    pass_id: str | None = None
    error: ErrorBody

    @classmethod
    def of(cls, entry: JobError) -> "JobErrorObject":
        return cls(row=entry.row, pass_id=entry.pass_id, error=error_body(entry.error))


class JobObject(BaseModel):
    id: str
    object: Literal["job"] = "job"
    type: Literal["import_passes", "update_passes", "template_rollout"]
    status: Literal["queued", "running", "succeeded", "failed", "canceled"]
    template_id: str | None
    total: int
    processed: int
    succeeded: int
    failed: int
    errors: list[JobErrorObject]
    created_at: str
    started_at: str | None
    finished_at: str | None

    @classmethod
    def of(cls, record: JobRecord) -> "JobObject":
        return cls(
            id=record.id,
            type=record.type,
            # An import still receiving its rows has not started: queued, to the client.
            status="queued" if record.status == "uploading" else record.status,
            template_id=record.template_id,
            total=record.total,
            processed=record.processed,
            succeeded=record.succeeded,
            failed=record.failed,
            errors=[JobErrorObject.of(entry) for entry in record.errors],
            created_at=iso(record.created_at),
            started_at=_iso_or_none(record.started_at),
            finished_at=_iso_or_none(record.finished_at),
        )


class ListObject(BaseModel, Generic[T]):
    object: Literal["list"] = "list"
    data: list[T]
    has_more: bool


class DeviceLogObject(BaseModel):
    id: str
    object: Literal["device_log"] = "device_log"
    message: str
    received_at: str

    @classmethod
    def of(cls, view: DeviceLogView) -> "DeviceLogObject":
        return cls(id=view.id, message=view.message, received_at=iso(view.received_at))


class DeletedObject(BaseModel):
    id: str
    deleted: Literal[True] = True


_ERRORS: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "authorization_error",
    404: "not_found_error",
    402: "billing_error",
    409: "idempotency_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    429: "rate_limit_error",
    500: "api_error",
}


def responses(model: type[BaseModel], *errors: int) -> dict[int | str, dict[str, Any]]:
    """The `responses=` of a route: its success body and the error envelopes it can answer."""
    documented: dict[int | str, dict[str, Any]] = {200: {"model": model}}
    # Every authenticated operation can be rate limited (docs/plans-and-limits.md).
    for status in (*(errors or (400, 401, 403, 404, 500)), 429):
        documented[status] = {"model": ErrorEnvelope, "description": _ERRORS[status]}
    return documented
