"""Message contracts: every message on NATS is one of these models. Subjects live beside them.

Commands go from the api to the service that owns the data over NATS request/reply; each
carries a `command_id` that makes it idempotent at the receiver (a replayed command returns the
stored result). Replies are `CommandOk` or `CommandFailed`. Lifecycle events go to the
JetStream stream `EVENTS_STREAM` with the event id as `Nats-Msg-Id`; an update's or a void's
goes first, wrapped in a `LiveUpdate`, to `LIVE_UPDATES_STREAM`, for the events service.
"""

from datetime import datetime
from functools import cache
from typing import Annotated, Any, ClassVar, Generic, Literal, TypeVar, cast

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from shared.models import (
    AppleStyle,
    DeliveryRecord,
    DownloadLinkRecord,
    JobRecord,
    Mode,
    PassBundleRecord,
    PassRecord,
    PassSnapshot,
    RowError,
    TemplateRecord,
    TemplateType,
)
from shared.scans import ScanRecord
from shared.views import WebhookView

# What a command answers: each command class names its result model (`result_type`), and the
# requester parses the reply into it, so the one boundary where a mismatch hurts is typed.
R = TypeVar("R", bound=BaseModel)

ISSUER_COMMANDS = "tessera.issuer.cmd"
# Queries: answered by the owner from its data and its keys, never recorded (no command marker).
ISSUER_QUERIES = "tessera.issuer.query"
WEBHOOKS_COMMANDS = "tessera.webhooks.cmd"
ISSUER_QUEUE = "issuer"
EVENTS_STREAM = "TESSERA_EVENTS"
EVENTS_SUBJECT_PREFIX = "tessera.events"
EVENTS_CONSUMER = "events"
WEBHOOKS_CONSUMER = "webhooks"


class _Message(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Command(_Message, Generic[R]):
    """A request to the service that owns the data; `R` is what it answers."""

    result_type: ClassVar[type[BaseModel]]
    subjects: ClassVar[str]  # the owner's subject prefix: the command goes to `<subjects>.<type>`

    type: str  # each command narrows it to its own literal, the discriminator
    command_id: str
    account_id: str
    mode: Mode
    request_id: str | None = None

    @property
    def subject(self) -> str:
        return f"{self.subjects}.{self.type}"

    def parse_result(self, result: Any) -> R:
        """The owner's answer (JSON or a stored copy of it) as this command's result model."""
        return cast(R, self.result_type.model_validate(result))


class _IssuerCommand(Command[R]):
    subjects: ClassVar[str] = ISSUER_COMMANDS


class CreateTemplate(_IssuerCommand[TemplateRecord]):
    result_type: ClassVar[type[BaseModel]] = TemplateRecord
    type: Literal["create_template"] = "create_template"
    name: str
    template_type: TemplateType
    apple_style: AppleStyle
    design: dict[str, Any]
    require_download_link: bool = False
    # What the client sent (shared/redemption.py); the issuer fills in the type's defaults.
    redemption: dict[str, Any] | None = None


class UpdateTemplate(_IssuerCommand[TemplateRecord]):
    result_type: ClassVar[type[BaseModel]] = TemplateRecord
    type: Literal["update_template"] = "update_template"
    template_id: str
    name: str | None = None
    design: dict[str, Any] | None = None
    archived: bool | None = None
    require_download_link: bool | None = None
    # Replaces the policy whole ({} is the type's defaults); None leaves it.
    redemption: dict[str, Any] | None = None


class CreatePass(_IssuerCommand[PassRecord]):
    result_type: ClassVar[type[BaseModel]] = PassRecord
    type: Literal["create_pass"] = "create_pass"
    template_id: str
    holder_email: str | None = None
    holder_name: str | None = None
    field_values: dict[str, str] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_via_api: bool = True


class UpdatePass(_IssuerCommand[PassRecord]):
    result_type: ClassVar[type[BaseModel]] = PassRecord
    type: Literal["update_pass"] = "update_pass"
    pass_id: str
    # The holder fields sent (holder_email, holder_name): a value, or None to remove it.
    holder: dict[str, str | None] | None = None
    # A None value removes the pass's own value: the field shows its template default again.
    field_values: dict[str, str | None] | None = None
    metadata: dict[str, Any] | None = None


class RedactPass(_IssuerCommand[PassRecord]):
    """Erase a pass's personal data and void it (docs/privacy.md)."""

    result_type: ClassVar[type[BaseModel]] = PassRecord
    type: Literal["redact_pass"] = "redact_pass"
    pass_id: str


class VoidPass(_IssuerCommand[PassRecord]):
    result_type: ClassVar[type[BaseModel]] = PassRecord
    type: Literal["void_pass"] = "void_pass"
    pass_id: str


class CreateDownloadLink(_IssuerCommand[DownloadLinkRecord]):
    """Mint an expiring link. Only the token's SHA-256 travels: the token never leaves the api."""

    result_type: ClassVar[type[BaseModel]] = DownloadLinkRecord
    type: Literal["create_download_link"] = "create_download_link"
    pass_id: str
    token_hash: str
    expires_in: int
    # The api's clock decides both ends of a link's life, so one clock governs expiry.
    created_at: datetime
    expires_at: datetime


class PassRow(_Message):
    """One pass to create, as POST /v1/passes takes it (less the template, said once)."""

    holder_email: str | None = None
    holder_name: str | None = None
    field_values: dict[str, str] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)


class BatchRow(PassRow):
    """A row of POST /v1/passes/batch: `index` is its place in the request."""

    index: int
    template_id: str


class BatchRowResult(_Message):
    """One row's outcome: the pass created, or why not. The pass's Google save link is left
    out (the pass object does not show it), so a batch's reply stays within what NATS carries."""

    index: int
    record: PassRecord | None = None
    error: RowError | None = None


class PassesCreated(_Message):
    rows: list[BatchRowResult]
    # With `bundle`: the bundle of the passes made (None when no row made one).
    bundle: PassBundleRecord | None = None


class CreatePasses(_IssuerCommand[PassesCreated]):
    """Up to 100 passes in one transaction, each row succeeding or failing on its own."""

    result_type: ClassVar[type[BaseModel]] = PassesCreated
    type: Literal["create_passes"] = "create_passes"
    rows: list[BatchRow]
    created_via_api: bool = True
    # Also make a bundle of the passes made (at most MAX_BUNDLE_PASSES rows); the rows of a
    # template that requires download links then fail, as a bundle's URLs are permanent.
    bundle: bool = False


class ImportRow(PassRow):
    """A row of an import job; `row` counts from 1. `error` is set when the api refused the row
    already (invalid, or past the quota): the job reports it without trying it."""

    row: int
    error: RowError | None = None


class ImportChunk(_Message):
    """One chunk of an import's work: `seq` orders the chunks of a job (and its results)."""

    seq: int
    rows: list[ImportRow]


class AddImportRows(_IssuerCommand[JobRecord]):
    """Store chunks of an import job's rows; the first one creates the job ("uploading").
    The api sends as many as the rows need (each within what NATS carries), then `StartJob`."""

    result_type: ClassVar[type[BaseModel]] = JobRecord
    type: Literal["add_import_rows"] = "add_import_rows"
    job_id: str
    template_id: str
    reserved: int = 0
    # When the api reserved them (its clock): canceled rows give them back to that month.
    reserved_at: datetime | None = None
    chunks: list[ImportChunk]


class StartJob(_IssuerCommand[JobRecord]):
    """The upload is complete: the job is queued and its chunks may be taken."""

    result_type: ClassVar[type[BaseModel]] = JobRecord
    type: Literal["start_job"] = "start_job"
    job_id: str
    total: int


class JobCanceled(_Message):
    """A canceled job, and how many units of the monthly quota its rows that will never run
    had reserved (an import's good rows in the chunks it canceled): the api gives them back.
    Not zero only in the answer of the command that canceled the job."""

    job: JobRecord
    released: int = 0


class CancelJob(_IssuerCommand[JobCanceled]):
    """Take no more of the job's chunks; what is done stays done."""

    result_type: ClassVar[type[BaseModel]] = JobCanceled
    type: Literal["cancel_job"] = "cancel_job"
    job_id: str


class CreateUpdatePassesJob(_IssuerCommand[JobRecord]):
    """An `update_passes` job: the values set on every non-voided pass of the template."""

    result_type: ClassVar[type[BaseModel]] = JobRecord
    type: Literal["create_update_passes_job"] = "create_update_passes_job"
    template_id: str
    field_values: dict[str, str | None] | None = None
    metadata: dict[str, Any] | None = None


class CreatePassBundle(_IssuerCommand[PassBundleRecord]):
    """Offer passes of the account and mode together (docs/api-decisions.md#pass-bundles):
    1 to MAX_BUNDLE_PASSES distinct ids, none voided or behind require_download_link."""

    result_type: ClassVar[type[BaseModel]] = PassBundleRecord
    type: Literal["create_pass_bundle"] = "create_pass_bundle"
    pass_ids: list[str]


class RedeemPass(_IssuerCommand[ScanRecord]):
    """A scan: decide, count and record it in one transaction (docs/redemption.md). Exactly
    one of `code` and `pass_id`."""

    result_type: ClassVar[type[BaseModel]] = ScanRecord
    type: Literal["redeem_pass"] = "redeem_pass"
    code: str | None = None
    pass_id: str | None = None
    location: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


IssuerCommand = Annotated[
    CreateTemplate
    | UpdateTemplate
    | CreatePass
    | UpdatePass
    | VoidPass
    | RedactPass
    | CreateDownloadLink
    | CreatePasses
    | AddImportRows
    | StartJob
    | CancelJob
    | RedeemPass
    | CreateUpdatePassesJob
    | CreatePassBundle,
    Field(discriminator="type"),
]
issuer_command_adapter: TypeAdapter[IssuerCommand] = TypeAdapter(IssuerCommand)


class GoogleSaveLink(_Message):
    url: str


class SignGoogleSaveLink(Command[GoogleSaveLink]):
    """A query, not a command: the pass's Google Wallet save link, signed now from the pass and
    its template as they are (docs/google-wallet.md#the-save-link-signed-when-asked). Nothing is
    written; `command_id` only names the request in logs."""

    subjects: ClassVar[str] = ISSUER_QUERIES
    result_type: ClassVar[type[BaseModel]] = GoogleSaveLink
    type: Literal["google_save_link"] = "google_save_link"
    pass_id: str


WEBHOOKS_QUEUE = "webhooks"
WebhookEventType = Literal[
    "pass.issued",
    "pass.add_intent",
    "pass.added_to_wallet",
    "pass.update_pushed",
    "pass.update_delivered",
    "pass.removed",
    "pass.voided",
    "pass.redeemed",
    "*",
]


class WebhookCreated(WebhookView):
    """A webhook with its signing secret: what a create or a rotation answers, the only answers
    that carry it."""

    secret: str


class Deleted(_Message):
    id: str
    deleted: Literal[True] = True


class _WebhooksCommand(Command[R]):
    subjects: ClassVar[str] = WEBHOOKS_COMMANDS


class CreateWebhook(_WebhooksCommand[WebhookCreated]):
    result_type: ClassVar[type[BaseModel]] = WebhookCreated
    type: Literal["create_webhook"] = "create_webhook"
    url: str
    events: list[WebhookEventType]
    description: str | None = None
    enabled: bool = True
    max_deliveries_per_second: int | None = None


# The webhook fields a PATCH may set to null.
NullableWebhookField = Literal["description", "max_deliveries_per_second"]


class UpdateWebhook(_WebhooksCommand[WebhookView]):
    result_type: ClassVar[type[BaseModel]] = WebhookView
    type: Literal["update_webhook"] = "update_webhook"
    webhook_id: str
    url: str | None = None
    events: list[WebhookEventType] | None = None
    description: str | None = None
    enabled: bool | None = None
    max_deliveries_per_second: int | None = None
    # The fields above that the client set to null (cleared); None elsewhere means "not sent".
    # Said apart because a command crosses NATS with every field, so which were set is lost.
    nulls: list[NullableWebhookField] = Field(default_factory=list)


class DeleteWebhook(_WebhooksCommand[Deleted]):
    result_type: ClassVar[type[BaseModel]] = Deleted
    type: Literal["delete_webhook"] = "delete_webhook"
    webhook_id: str


class ResendDelivery(_WebhooksCommand[DeliveryRecord]):
    """One more attempt of a delivery now, whatever its status (docs/webhooks.md)."""

    result_type: ClassVar[type[BaseModel]] = DeliveryRecord
    type: Literal["resend_delivery"] = "resend_delivery"
    webhook_id: str
    delivery_id: str


class WebhookRecovery(_Message):
    """What a recover re-queued: the webhook's failed and dead deliveries created in
    [since, until)."""

    webhook_id: str
    since: datetime
    until: datetime  # the end used: the time of the recover when the client sent none
    requeued: int
    created_at: datetime


class RecoverDeliveries(_WebhooksCommand[WebhookRecovery]):
    result_type: ClassVar[type[BaseModel]] = WebhookRecovery
    type: Literal["recover_deliveries"] = "recover_deliveries"
    webhook_id: str
    since: datetime
    until: datetime | None = None  # None: up to now


# How long a rotated-out secret keeps signing (docs/webhooks.md#secret-rotation).
DEFAULT_GRACE_SECONDS = 86_400
MAX_GRACE_SECONDS = 604_800


class RotateWebhookSecret(_WebhooksCommand[WebhookCreated]):
    """A new signing secret; the current one keeps signing for the grace period
    (services/webhooks/rotation.py). Answers the webhook with the new secret."""

    result_type: ClassVar[type[BaseModel]] = WebhookCreated
    type: Literal["rotate_webhook_secret"] = "rotate_webhook_secret"
    webhook_id: str
    grace_period_seconds: int


WebhooksCommand = Annotated[
    CreateWebhook
    | UpdateWebhook
    | DeleteWebhook
    | ResendDelivery
    | RecoverDeliveries
    | RotateWebhookSecret,
    Field(discriminator="type"),
]
webhooks_command_adapter: TypeAdapter[WebhooksCommand] = TypeAdapter(WebhooksCommand)


class WireError(_Message):
    type: str
    status: int
    message: str
    param: str | None = None
    code: str | None = None


class CommandOk(_Message, Generic[R]):
    ok: Literal[True] = True
    result: R


class CommandFailed(_Message):
    ok: Literal[False] = False
    error: WireError


def ok_reply(result: BaseModel) -> bytes:
    """The reply carrying `result`, serialized as its own model."""
    # The envelope of CommandOk around the result's own JSON (the result's class is only
    # known at run time, and serializing through a base class would drop its fields).
    return b'{"ok":true,"result":' + result.model_dump_json().encode() + b"}"


@cache
def reply_adapter(result_type: type[BaseModel]) -> TypeAdapter[Any]:
    """Parses a reply to a command whose result is `result_type`: CommandOk or CommandFailed."""
    ok = CommandOk[result_type]  # type: ignore[valid-type]  # a model class known at run time
    return TypeAdapter(Annotated[ok | CommandFailed, Field(discriminator="ok")])


PassEventType = Literal[
    "created", "url_viewed", "downloaded", "installed", "updated", "removed", "voided", "redeemed"
]


class PassEventMessage(_Message):
    """A pass lifecycle event as published to the stream (and recorded by the events service)."""

    type: Literal["pass_event"] = "pass_event"
    id: str
    account_id: str
    mode: Mode
    pass_id: str
    event_type: PassEventType
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: datetime
    # The pass as it was right after the event, so consumers need not read it back.
    pass_snapshot: PassSnapshot

    @property
    def subject(self) -> str:
        return f"{EVENTS_SUBJECT_PREFIX}.pass.{self.event_type}"


pass_event_adapter: TypeAdapter[PassEventMessage] = TypeAdapter(PassEventMessage)


# Live updates: an update or a void that committed, for the events service to push to the
# pass's devices before it publishes the event (docs/wallet-callbacks.md). A work queue: each
# live update is taken by one replica and removed once acknowledged.
LIVE_UPDATES_STREAM = "TESSERA_LIVE_UPDATES"
LIVE_UPDATES_SUBJECT_PREFIX = "tessera.live"
LIVE_UPDATES_CONSUMER = "live-updates"
LIVE_UPDATE_EVENT_TYPES: frozenset[PassEventType] = frozenset({"updated", "voided"})


class LiveUpdate(_Message):
    """The event of an update or a void, published by the events service only once the pass's
    devices were pushed, with the push counts merged into its metadata."""

    type: Literal["live_update"] = "live_update"
    event: PassEventMessage

    @property
    def id(self) -> str:
        """The event's id: also the live update's outbox id and Nats-Msg-Id."""
        return self.event.id

    @property
    def subject(self) -> str:
        return f"{LIVE_UPDATES_SUBJECT_PREFIX}.pass.{self.event.event_type}"


live_update_adapter: TypeAdapter[LiveUpdate] = TypeAdapter(LiveUpdate)


def stream_of(subject: str) -> str:
    """The JetStream stream that captures `subject` (the outbox relay publishes to both)."""
    live = subject.startswith(f"{LIVE_UPDATES_SUBJECT_PREFIX}.")
    return LIVE_UPDATES_STREAM if live else EVENTS_STREAM
