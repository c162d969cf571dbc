"""Stored records that more than one service reads: the owner writes them, the api reads them.

Each maps one MongoDB document (`_id` is the object id) and crosses NATS as JSON.
"""

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field

from shared.errors import ApiError
from shared.redemption import OnLimit, RedemptionPolicy, default_policy

Mode = Literal["test", "live"]


def email_key(email: str) -> str:
    """What `holder_email` is matched by: the address lowercased, local part included, as every
    mail system users know compares addresses; what was given is kept for display."""
    return email.strip().lower()


TemplateType = Literal["event", "membership", "coupon", "loyalty", "generic"]
AppleStyle = Literal["eventTicket", "generic", "storeCard", "coupon", "boardingPass"]


class _Record(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="ignore")

    id: str = Field(alias="_id")
    account_id: str
    mode: Mode
    created_at: datetime

    def to_document(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True)


class TemplateRecord(_Record):
    name: str
    type: TemplateType
    apple_style: AppleStyle
    design: dict[str, Any]
    archived: bool = False
    require_download_link: bool = False
    # 1, then +1 on every PATCH that changes `design`; and the rollout job of the latest one,
    # which re-renders the template's passes (services/issuer/jobs/rollout.py).
    design_version: int = 1
    rollout_job_id: str | None = None
    # None for a template stored before redemption policies: its type's defaults apply.
    redemption: RedemptionPolicy | None = None
    updated_at: datetime

    def policy(self) -> RedemptionPolicy:
        """The effective redemption policy (docs/redemption.md)."""
        return self.redemption or default_policy(self.type)


class PassSnapshot(BaseModel):
    """The pass fields a webhook delivery carries (spec 6.3 data.pass)."""

    id: str
    short_id: str
    mode: Mode
    holder_email: str | None
    holder_name: str | None
    field_values: dict[str, str]
    voided: bool


GoogleStatus = Literal["pending", "synced", "failing"]


class PassRecord(_Record):
    short_id: str
    template_id: str
    serial_number: str
    holder_email: str | None = None
    holder_name: str | None = None
    field_values: dict[str, str] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)
    voided: bool = False
    voided_at: datetime | None = None
    created_via_api: bool = True
    authentication_token: str
    # Whether the pass has a Google Wallet save link: "" yes, signed by the issuer when the
    # `/google` redirect asks (services/issuer/google_links.py); None no (live mode with Apple
    # credentials only). Passes stored before 2026-11-27 hold the link they were issued with,
    # which is not used any more: every redirect signs the link afresh.
    google_save_url: str | None = None
    # With Google credentials, the object at Google (docs/google-wallet.md#the-google-step):
    # "pending" until the sync step upserted this version, then "synced"; "failing" while
    # Google refuses it or is down (retried with backoff; `google_error` says why). None
    # without credentials: the save link carries the whole object. `google_sync_due`: when
    # the step is to run (None: nothing to do).
    google_status: GoogleStatus | None = None
    google_sync_due: datetime | None = None
    google_error: str | None = None
    # A digest of the object as last synced (google/passes.py `object_digest`): a job that
    # re-renders the pass marks it for the Google step only when its object differs.
    google_object_digest: str | None = None
    version: int = 1
    # The template's design_version its current file was built from.
    design_version: int = 1
    # The Last-Modified of its current file (`pass_files`), kept here so that the next version's
    # (a whole second later at least) needs no read of the file. None on passes stored before
    # 2026-11-27: the file's own is read then (IssuerRepository.file_stamp).
    file_modified_at: datetime | None = None
    updated_at: datetime
    # Redemption (docs/redemption.md): accepted scans so far, the template's limit and
    # `on_limit` (kept current by template updates; None: unlimited, and not recorded on a
    # pass stored before 2026-12-02), the barcode message as rendered (what a scan looks up),
    # and whether the last allowed scan marked the wallet copy used (rendered voided, Google
    # COMPLETED; `voided` itself stays False: the issuer did not void it).
    redemption_count: int = 0
    last_redeemed_at: datetime | None = None
    redemption_limit: int | None = None
    redemption_on_limit: OnLimit | None = None
    barcode_message: str | None = None
    used_up: bool = False

    @computed_field  # type: ignore[prop-decorator]  # pydantic's documented computed-field form
    @property
    def holder_email_key(self) -> str | None:
        """Stored with every write of the pass (indexed): `GET /v1/passes?holder_email=`
        matches it. Recomputed on load, so a document saved before it existed reads the same."""
        return None if self.holder_email is None else email_key(self.holder_email)

    def to_document(self) -> dict[str, Any]:
        document = super().to_document()
        if document["google_sync_due"] is None:  # absent: its sparse index holds the due only
            del document["google_sync_due"]
        return document

    def snapshot(self) -> PassSnapshot:
        return PassSnapshot(
            id=self.id,
            short_id=self.short_id,
            mode=self.mode,
            holder_email=self.holder_email,
            holder_name=self.holder_name,
            field_values=self.field_values,
            voided=self.voided,
        )


class PassEventRecord(_Record):
    pass_id: str
    type: str
    metadata: dict[str, Any] = Field(default_factory=dict)


class DownloadLinkRecord(_Record):
    """An expiring link to a pass; the token itself is never stored, only its SHA-256."""

    pass_id: str
    token_hash: str
    expires_in: int
    expires_at: datetime


# Apple Wallet takes at most 10 passes in one .pkpasses bundle (docs/pages.md#pass-bundles).
MAX_BUNDLE_PASSES = 10


class PassBundleRecord(_Record):
    """The passes of one order, offered together at `{site_url}/b/{id}` (a landing page) and
    `/b/{id}.pkpasses` (Apple's bundle); made once and never changed."""

    pass_ids: list[str]


class PreviousSecret(BaseModel):
    """A signing secret replaced by a rotation, still signing until `expires_at` (its grace
    period, docs/webhooks.md#secret-rotation); encrypted like the current one."""

    secret_encrypted: str
    expires_at: datetime
    # The command of the rotation that made it the current secret (None for a webhook's first
    # secret): a replay of that command answers it, though another rotation came since.
    rotated_by: str | None = None


# Why a webhook is disabled: "failing" when Tessera disabled it after every attempt failed for
# TESSERA_WEBHOOKS_DISABLE_AFTER (docs/webhooks.md#auto-disable); None when the account did.
DisabledReason = Literal["failing"]


class WebhookRecord(_Record):
    """A subscription. The signing secrets are stored encrypted (Fernet), never in clear."""

    url: str
    events: list[str]
    description: str | None = None
    enabled: bool = True
    secret_encrypted: str
    updated_at: datetime
    # Rotated-out secrets in their grace period, newest first.
    previous_secrets: list[PreviousSecret] = []
    disabled_reason: DisabledReason | None = None
    disabled_at: datetime | None = None
    # Since when every attempt failed (None after any success), and how many failed in a row.
    failing_since: datetime | None = None
    consecutive_failures: int = 0
    # None: unlimited. Deliveries beyond it wait their turn, not counted as attempts.
    max_deliveries_per_second: int | None = None
    # A 429/503 with Retry-After: nothing is sent to the endpoint before this time.
    paused_until: datetime | None = None


DeliveryStatus = Literal["pending", "delivered", "failed", "dead"]
# A delivery's end: nothing is scheduled for it (a resend or a recover may ask again).
FINISHED_DELIVERY_STATUSES: frozenset[str] = frozenset({"delivered", "dead"})
DeliveryTrigger = Literal["scheduled", "manual"]


class DeliveryRecord(_Record):
    """One event to one webhook, with the state of its attempts (spec 2.7, 3.5)."""

    webhook_id: str
    event_id: str
    event_type: str
    payload: str  # the exact body sent on every attempt (spec 6.3)
    # The pass the event is about: a redaction finds its copies by it (docs/privacy.md).
    pass_id: str | None = None
    status: DeliveryStatus = "pending"
    attempts: int = 0
    last_attempt_at: datetime | None = None
    next_attempt_at: datetime | None = None
    response_status: int | None = None
    response_body: str | None = None
    # A claim on the next attempt: replicas skip a delivery while its lease runs.
    lease_until: datetime | None = None
    lease_owner: str | None = None
    # What made the last attempt: the retry schedule, or a resend or recover ("manual").
    trigger: DeliveryTrigger | None = None
    # A resend or recover asked for an attempt at this time, whatever the status; cleared by
    # that attempt. A manual attempt that fails leaves a delivered or dead delivery as it was
    # and a pending or failed one on its schedule (docs/webhooks.md#resend-and-recover).
    manual_at: datetime | None = None

    def to_document(self) -> dict[str, Any]:
        document = super().to_document()
        if document["manual_at"] is None:  # absent: its sparse index holds only the asked
            del document["manual_at"]
        return document


# Jobs (docs/architecture.md#jobs): long work the issuer splits into chunks that any replica
# takes. The issuer writes them; the api reads them through IssuerReads.jobs.
JobType = Literal["import_passes", "update_passes", "template_rollout"]
# "uploading" is the issuer's own: an import whose rows are still arriving (shown as "queued").
JobStatus = Literal["uploading", "queued", "running", "succeeded", "failed", "canceled"]
FINISHED_JOB_STATUSES: frozenset[str] = frozenset({"succeeded", "failed", "canceled"})


class RowError(BaseModel):
    """Why one row (or one pass) of a batch or a job failed: the spec's error object and its
    HTTP status, as POST /v1/passes would have answered it."""

    status: int
    type: str
    code: str | None = None
    message: str
    param: str | None = None


def row_error(error: ApiError) -> RowError:
    """The RowError of a row refused with `error`."""
    return RowError(
        status=error.status,
        type=error.type,
        code=error.code,
        message=error.message,
        param=error.param,
    )


class JobError(BaseModel):
    """One of a job's first errors: its row (imports) or its pass (updates)."""

    row: int | None = None
    pass_id: str | None = None
    error: RowError


class JobRecord(_Record):
    type: JobType
    status: JobStatus
    template_id: str | None = None
    total: int = 0
    processed: int = 0
    succeeded: int = 0
    failed: int = 0
    errors: list[JobError] = Field(default_factory=list)
    # Passes of the monthly quota reserved for the job's rows (imports), and when the api
    # reserved them (their month's quota is the one a cancel gives them back to).
    reserved: int = 0
    reserved_at: datetime | None = None
    # What a job type needs besides its chunks (the values of an update_passes job, say).
    params: dict[str, Any] = Field(default_factory=dict)
    started_at: datetime | None = None
    finished_at: datetime | None = None
    updated_at: datetime


class JobRowOutcome(BaseModel):
    """What became of one row of a job: the pass it made or changed, or its error. `row` for
    the rows of an import (from 1), `pass_id` alone for jobs over existing passes."""

    row: int | None = None
    pass_id: str | None = None
    short_id: str | None = None
    error: RowError | None = None
