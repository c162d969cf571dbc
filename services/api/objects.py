"""The spec's objects (section 2): one model per object, which endpoints build their bodies
with (`PassObject.of(record, site_url)`) and which the OpenAPI document describes them by. The
webhook, scan and bundle objects have modules of their own (webhook_objects.py,
scan_objects.py, bundle_objects.py).
"""

from datetime import datetime
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from services.api.bundle_objects import PassBundleObject
from services.api.scan_objects import RedemptionObject
from shared.clock import iso
from shared.models import (
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
from shared.views import DeviceLogView

T = TypeVar("T")


def _iso_or_none(moment: datetime | None) -> str | None:
    return None if moment is None else iso(moment)


def pass_urls(site_url: str, short_id: str) -> tuple[str, str]:
    """A pass's landing page and its .pkpass download under {site_url}."""
    page = f"{site_url}/p/{short_id}"
    return page, f"{page}/pass.pkpass"


class ErrorBody(BaseModel):
    type: str = Field(
        description="The kind of error: `invalid_request_error`, `authentication_error`, "
        "`authorization_error`, `not_found_error`, `billing_error`, "
        "`rate_limit_error`, `idempotency_error` or `api_error`."
    )
    code: str | None = Field(
        description="A short code naming the error, e.g. `parameter_missing` "
        "(docs/api-decisions.md#errors lists them); never null on the v1 API."
    )
    message: str = Field(description="What went wrong, in a sentence for a person.")
    param: str | None = Field(
        description="The offending parameter, as a dotted path for nested fields "
        "(`field_values.seat`); null when none applies."
    )


class ErrorEnvelope(BaseModel):
    error: ErrorBody = Field(description="The error.")


class TemplateObject(BaseModel):
    id: str = Field(description="Unique identifier, prefix `tmpl_`.")
    object: Literal["template"] = Field("template", description="Always `template`.")
    name: str = Field(description="Display name.")
    type: str = Field(description="`event`, `membership`, `coupon`, `loyalty` or `generic`.")
    apple_style: str = Field(
        description="The Apple Wallet pass style: `eventTicket`, `generic`, `storeCard`, "
        "`coupon` or `boardingPass`."
    )
    design: dict[str, Any] = Field(
        description="What every pass of the template shows, as stored: every optional field "
        "present with its default (docs/templates.md)."
    )
    archived: bool = Field(
        description="Whether the template is archived: its passes stay valid, and no pass "
        "can be issued from it."
    )
    require_download_link: bool = Field(
        description="When true, its passes are reachable only through expiring download "
        "links: their permanent `url` and `download_url` answer 404."
    )
    design_version: int = Field(description="1, then +1 on every change of `design`.")
    rollout_job_id: str | None = Field(
        description="The `template_rollout` job carrying the current design to the passes; "
        "null while `design_version` is 1."
    )
    redemption: RedemptionObject = Field(
        description="The effective redemption policy: the type's defaults filled in."
    )
    created_at: str = Field(description="Creation timestamp (ISO 8601, UTC, milliseconds).")
    updated_at: str = Field(description="Last update timestamp.")

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
    id: str = Field(description="Unique identifier, prefix `pass_`.")
    object: Literal["pass"] = Field("pass", description="Always `pass`.")
    short_id: str = Field(
        description="The unguessable slug of the pass's public URLs (`/p/{short_id}`)."
    )
    template_id: str = Field(description="The template the pass was issued from.")
    serial_number: str = Field(
        description="The pass's unique serial number (a UUID), as Apple Wallet knows it; "
        "the default barcode message."
    )
    mode: Mode = Field(description="`test` or `live`: the mode of the key that issued it.")
    holder_email: str | None = Field(description="The holder's email address, as given.")
    holder_name: str | None = Field(description="The holder's name.")
    field_values: dict[str, str] = Field(
        description="Values of the template's fields, by field key; a field without one "
        "shows its default."
    )
    voided: bool = Field(description="Whether the pass is voided.")
    voided_at: str | None = Field(description="When it was voided; null while it is not.")
    metadata: dict[str, Any] = Field(
        description="Your own data about the pass: string keys, any JSON values; never "
        "shown to the holder."
    )
    created_via_api: bool = Field(description="Whether the pass was created through the API.")
    design_version: int = Field(
        description="The template's `design_version` the pass's current file was built from."
    )
    redemption_count: int = Field(description="Accepted scans.")
    last_redeemed_at: str | None = Field(
        description="When the last accepted scan was; null before any."
    )
    redemptions_remaining: int | None = Field(
        description="How many more scans the template's policy accepts; null for unlimited."
    )
    google_status: str | None = Field(
        description="With Google Wallet credentials, where the pass's object is at Google: "
        "`pending`, `synced` or `failing` (retried); null without them."
    )
    url: str = Field(description="The permanent public landing page, under {site_url}.")
    download_url: str = Field(
        description="Direct download of the signed `.pkpass`, under {site_url}."
    )
    google_save_url: str | None = Field(
        description="Save to Google Wallet: a link under {site_url} that records the "
        "`add_intent` and redirects (302) to Google's save link for the pass's current "
        "version. Null when Tessera has no Google Wallet issuer (Apple-only live mode)."
    )
    created_at: str = Field(description="Creation timestamp (ISO 8601, UTC, milliseconds).")

    @classmethod
    def of(cls, record: PassRecord, site_url: str) -> "PassObject":
        url, download_url = pass_urls(site_url, record.short_id)
        google = None if record.google_save_url is None else f"{url}/google"
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
            google_save_url=google,
            created_at=iso(record.created_at),
        )


class PassEventObject(BaseModel):
    id: str = Field(description="Unique identifier, prefix `psEvnt_`.")
    object: Literal["pass_event"] = Field("pass_event", description="Always `pass_event`.")
    pass_id: str = Field(description="The pass the event belongs to.")
    type: str = Field(
        description="`created`, `url_viewed`, `downloaded`, `installed`, `updated`, "
        "`removed`, `voided` or `redeemed`."
    )
    metadata: dict[str, Any] = Field(
        description="What the event records, by type (docs/api-decisions.md#event-metadata)."
    )
    created_at: str = Field(description="When it happened.")

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
    object: Literal["pass.download_link"] = Field(
        "pass.download_link", description="Always `pass.download_link`."
    )
    pass_id: str = Field(description="The pass the link resolves to.")
    url: str = Field(
        description="The link to hand to the holder. Its token is in this answer only "
        "(Tessera keeps a hash of it), so the URL cannot be retrieved again."
    )
    expires_in: int = Field(description="Lifetime in seconds, as requested.")
    expires_at: str = Field(description="When the link stops resolving (then it answers 410).")
    created_at: str = Field(description="Creation timestamp (ISO 8601, UTC, milliseconds).")

    @classmethod
    def of(cls, record: DownloadLinkRecord, url: str) -> "DownloadLinkObject":
        return cls(
            pass_id=record.pass_id,
            url=url,
            expires_in=record.expires_in,
            expires_at=iso(record.expires_at),
            created_at=iso(record.created_at),
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
    object: Literal["batch"] = Field("batch", description="Always `batch`.")
    data: list[BatchRowObject] = Field(
        description="One entry per row of the request, in order: its `index` and `status`, "
        "and the `pass` made or the `error`."
    )
    bundle: PassBundleObject | None = Field(
        None,
        description="With `bundle: true`, the pass bundle of the passes made; null "
        "otherwise, or when no row made a pass.",
    )


class JobErrorObject(_Sparse):
    row: int | None = None
    pass_id: str | None = None
    error: ErrorBody

    @classmethod
    def of(cls, entry: JobError) -> "JobErrorObject":
        return cls(row=entry.row, pass_id=entry.pass_id, error=error_body(entry.error))


class JobObject(BaseModel):
    id: str = Field(description="Unique identifier, prefix `job_`.")
    object: Literal["job"] = Field("job", description="Always `job`.")
    type: Literal["import_passes", "update_passes", "template_rollout"] = Field(
        description="`import_passes`, `update_passes`, or `template_rollout` (started by a "
        "change of a template's design)."
    )
    status: Literal["queued", "running", "succeeded", "failed", "canceled"] = Field(
        description="`queued`, `running`, then `succeeded` (at least one row succeeded), "
        "`failed` or `canceled`."
    )
    template_id: str | None = Field(description="The template the job works on.")
    total: int = Field(
        description="Rows (imports) or passes (updates, rollouts) to process. A rollout's grows "
        "when its closing sweep finds passes made from the old design while it changed."
    )
    processed: int = Field(description="Processed so far; only grows.")
    succeeded: int = Field(description="Succeeded so far.")
    failed: int = Field(description="Failed so far.")
    errors: list[JobErrorObject] = Field(
        description="The first 100 failures, each with its `row` (imports, from 1) or "
        "`pass_id`; every failure is in the results."
    )
    created_at: str = Field(description="Creation timestamp (ISO 8601, UTC, milliseconds).")
    started_at: str | None = Field(description="When a worker started it; null while queued.")
    finished_at: str | None = Field(description="When it finished; null until then.")

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
    object: Literal["list"] = Field("list", description="Always `list`.")
    data: list[T] = Field(description="The objects of this page, newest first.")
    has_more: bool = Field(description="Whether more objects follow.")


class DeviceLogObject(BaseModel):
    id: str = Field(description="Unique identifier, prefix `dlog_`.")
    object: Literal["device_log"] = Field("device_log", description="Always `device_log`.")
    message: str = Field(description="What the device logged.")
    received_at: str = Field(description="When Tessera received it.")

    @classmethod
    def of(cls, view: DeviceLogView) -> "DeviceLogObject":
        return cls(id=view.id, message=view.message, received_at=iso(view.received_at))


class DeletedObject(BaseModel):
    id: str = Field(description="The object's id.")
    deleted: Literal[True] = Field(
        True, description="Always true (a template is archived, not deleted)."
    )


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
