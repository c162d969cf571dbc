"""Message contracts: every message on NATS is one of these models. Subjects live beside them.

Commands go from the api to the service that owns the data over NATS request/reply; each
carries a `command_id` that makes it idempotent at the receiver (a replayed command returns the
stored result). Replies are `CommandOk` or `CommandFailed`. Lifecycle events go to the
JetStream stream `EVENTS_STREAM` with the event id as `Nats-Msg-Id`.
"""

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from shared.models import PassSnapshot

Mode = Literal["test", "live"]

ISSUER_COMMANDS = "tessera.issuer.cmd"
ISSUER_QUEUE = "issuer"
EVENTS_STREAM = "TESSERA_EVENTS"
EVENTS_SUBJECT_PREFIX = "tessera.events"
EVENTS_CONSUMER = "events"
WEBHOOKS_CONSUMER = "webhooks"


class _Message(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Command(_Message):
    command_id: str
    account_id: str
    mode: Mode
    request_id: str | None = None


class CreateTemplate(Command):
    type: Literal["create_template"] = "create_template"
    name: str
    template_type: str
    apple_style: str
    design: dict[str, Any]
    require_download_link: bool = False


class UpdateTemplate(Command):
    type: Literal["update_template"] = "update_template"
    template_id: str
    name: str | None = None
    design: dict[str, Any] | None = None
    archived: bool | None = None
    require_download_link: bool | None = None


class CreatePass(Command):
    type: Literal["create_pass"] = "create_pass"
    template_id: str
    holder_email: str | None = None
    holder_name: str | None = None
    field_values: dict[str, str] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_via_api: bool = True


class UpdatePass(Command):
    type: Literal["update_pass"] = "update_pass"
    pass_id: str
    field_values: dict[str, str] | None = None
    metadata: dict[str, Any] | None = None


class VoidPass(Command):
    type: Literal["void_pass"] = "void_pass"
    pass_id: str


class CreateDownloadLink(Command):
    """Mint an expiring link. Only the token's SHA-256 travels: the token never leaves the api."""

    type: Literal["create_download_link"] = "create_download_link"
    pass_id: str
    token_hash: str
    expires_in: int
    # The api's clock decides both ends of a link's life, so one clock governs expiry.
    created_at: datetime
    expires_at: datetime


IssuerCommand = Annotated[
    CreateTemplate | UpdateTemplate | CreatePass | UpdatePass | VoidPass | CreateDownloadLink,
    Field(discriminator="type"),
]
issuer_command_adapter: TypeAdapter[IssuerCommand] = TypeAdapter(IssuerCommand)


def issuer_subject(command_type: str) -> str:
    return f"{ISSUER_COMMANDS}.{command_type}"


WEBHOOKS_COMMANDS = "tessera.webhooks.cmd"
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


class CreateWebhook(Command):
    type: Literal["create_webhook"] = "create_webhook"
    url: str
    events: list[WebhookEventType]
    description: str | None = None
    enabled: bool = True


class UpdateWebhook(Command):
    type: Literal["update_webhook"] = "update_webhook"
    webhook_id: str
    url: str | None = None
    events: list[WebhookEventType] | None = None
    description: str | None = None
    enabled: bool | None = None


class DeleteWebhook(Command):
    type: Literal["delete_webhook"] = "delete_webhook"
    webhook_id: str


WebhooksCommand = Annotated[
    CreateWebhook | UpdateWebhook | DeleteWebhook, Field(discriminator="type")
]
webhooks_command_adapter: TypeAdapter[WebhooksCommand] = TypeAdapter(WebhooksCommand)


def webhooks_subject(command_type: str) -> str:
    return f"{WEBHOOKS_COMMANDS}.{command_type}"


WALLET_COMMANDS = "tessera.wallet.cmd"  # not under tessera.events.>: that is the stream's
WALLET_QUEUE = "events"


class DropPushToken(_Message):
    """APNs answered 410 for a push token: the events service (which owns `registrations`)
    removes the registrations that use it, unless they were renewed after `inactive_since`."""

    type: Literal["drop_push_token"] = "drop_push_token"
    command_id: str
    pass_type_identifier: str
    push_token: str
    inactive_since: datetime | None = None
    request_id: str | None = None


WalletCommand = Annotated[DropPushToken, Field(discriminator="type")]
wallet_command_adapter: TypeAdapter[WalletCommand] = TypeAdapter(WalletCommand)


def wallet_subject(command_type: str) -> str:
    return f"{WALLET_COMMANDS}.{command_type}"


class WireError(_Message):
    type: str
    status: int
    message: str
    param: str | None = None
    code: str | None = None


class CommandOk(_Message):
    ok: Literal[True] = True
    result: dict[str, Any]


class CommandFailed(_Message):
    ok: Literal[False] = False
    error: WireError


CommandReply = Annotated[CommandOk | CommandFailed, Field(discriminator="ok")]
command_reply_adapter: TypeAdapter[CommandReply] = TypeAdapter(CommandReply)


PassEventType = Literal[
    "created", "url_viewed", "downloaded", "installed", "updated", "removed", "voided"
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
