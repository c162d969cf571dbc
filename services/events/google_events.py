"""Google Wallet callbacks -> `installed` / `removed` pass events.

A verified callback (services/events/google_verify.py) names an object, which names a pass
(`<issuer id>.<pass id>`). Its nonce and its event are written in one transaction, the event to
the service's outbox (events_out.py), whose relay publishes it: a nonce stored is an event
recorded, and a nonce seen before is a replay and is refused. When the store fails nothing is
written and Google's retry (of a 503) records the callback once.
"""

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from pymongo.errors import PyMongoError

from services.events.config import EventsSettings
from services.events.google_verify import (
    CallbackRejected,
    MalformedCallback,
    RootKey,
    SignedMessage,
    WrongProtocol,
    load_root_keys,
    verify_callback,
)
from services.events.repository import GoogleNonces
from services.issuer.reads import IssuerReads
from shared.clock import Clock
from shared.errors import ApiError, AuthenticationError, InvalidRequest, NotFound
from shared.google_ids import pass_id_of
from shared.messages import PassEventMessage, PassEventType
from shared.pass_events import pass_event

log = logging.getLogger(__name__)

# Nonces are kept this long past their message's expiry, so clocks a little apart cannot open
# a window where the nonce is forgotten but the message still counts as unexpired.
NONCE_RETENTION_MARGIN: Final = timedelta(days=1)
_EVENT_TYPES: Final[dict[str, PassEventType]] = {"save": "installed", "del": "removed"}


class Unavailable(ApiError):
    """Ours, not the caller's: Google retries a 5xx."""

    status = 503


class NonceReplayed(ApiError):
    type = "invalid_request_error"
    status = 409


@dataclass(frozen=True)
class GoogleCallbacks:
    """What handling a callback needs; `root_keys` is None when none are configured."""

    nonces: GoogleNonces
    passes: IssuerReads
    clock: Clock
    issuer_id: str
    root_keys: list[RootKey] | None


def root_keys_from(settings: EventsSettings) -> list[RootKey] | None:
    """The configured root keys; a bad file stops the service at start, naming the problem."""
    if settings.google_root_keys_path is None:
        return None
    try:
        return load_root_keys(settings.google_root_keys_path.read_bytes())
    except (OSError, ValueError) as exc:
        raise ValueError(f"TESSERA_EVENTS_GOOGLE_ROOT_KEYS_PATH: {exc}") from exc


async def handle_callback(callbacks: GoogleCallbacks, body: bytes) -> PassEventMessage:
    """Verify a callback and record its pass event; raises an ApiError for every refusal."""
    if callbacks.root_keys is None:
        raise Unavailable(
            "Google Wallet callbacks are not configured: set TESSERA_EVENTS_GOOGLE_ROOT_KEYS_PATH.",
            code="google_callbacks_not_configured",
        )
    now = callbacks.clock.now()
    try:
        message = verify_callback(
            body, root_keys=callbacks.root_keys, issuer_id=callbacks.issuer_id, now=now
        )
    except CallbackRejected as exc:
        log.warning("refused a Google Wallet callback (%s): %s", exc.reason, exc)
        raise _refusal(exc) from None
    return await _record(callbacks, message, now)


async def _record(
    callbacks: GoogleCallbacks, message: SignedMessage, now: datetime
) -> PassEventMessage:
    pass_id = pass_id_of(callbacks.issuer_id, message.object_id)
    record = None if pass_id is None else await callbacks.passes.pass_by_id(pass_id)
    if pass_id is None or record is None:
        log.warning("Google Wallet callback for unknown object %s", message.object_id)
        raise NotFound(f"No such pass object: '{message.object_id}'", code="resource_missing")
    event_type = _EVENT_TYPES[message.event_type]
    event = pass_event(record, event_type, {"wallet": "google"}, now)
    expires_at = max(message.expires_at, now) + NONCE_RETENTION_MARGIN
    try:
        fresh = await callbacks.nonces.record(message.nonce, event, expires_at)
    except PyMongoError as exc:
        # Nothing was written, so Google's retry records this callback once.
        log.exception("could not record the %s event of %s", event_type, pass_id)
        raise Unavailable("The event could not be recorded; retry later.") from exc
    if not fresh:
        log.warning("replayed Google Wallet callback nonce for %s", pass_id)
        raise NonceReplayed(
            "This callback's nonce was already processed.", code="google_callback_replayed"
        )
    return event


def _refusal(exc: CallbackRejected) -> ApiError:
    """400 for a body that is not a callback at all; 401 for one that fails authentication."""
    code = f"google_callback_{exc.reason}"
    if isinstance(exc, MalformedCallback | WrongProtocol):
        return InvalidRequest(f"Not a Google Wallet callback: {exc}.", code=code)
    return AuthenticationError(f"The Google Wallet callback was refused: {exc}.", code=code)
