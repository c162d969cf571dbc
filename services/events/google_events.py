"""Google Wallet callbacks -> `installed` / `removed` pass events.

A verified callback (services/events/google_verify.py) names an object, which names a pass
(`<issuer id>.<pass id>`). Its nonce and its event are written in one transaction, the event to
the service's outbox (events_out.py), whose relay publishes it: a nonce stored is an event
recorded. Google does not retry a callback answered with a 4xx, so whatever Google signed for
us is acknowledged with 200, recorded or not: a nonce seen before is a delivery Google repeated
(nothing is recorded twice), and an eventType other than save and del is one Google added
since (logged, nothing recorded). A message without a nonce is deduplicated by the digest of
its signed text instead. When the store fails, or no root key can be had, nothing is written
and Google's retry (of a 503) records the callback once.
"""

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from pymongo.errors import PyMongoError

from services.events.config import EventsSettings
from services.events.google_root_keys import RootKeySource, RootKeysUnavailable, root_key_source
from services.events.google_verify import (
    CallbackRejected,
    MalformedCallback,
    RootKey,
    SignedMessage,
    WrongProtocol,
    parse_callback,
    verify_envelope,
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
# Longer nonces are stored as their digest: a key that size is not Google's random nonce.
_MAX_NONCE_LENGTH: Final = 128


class Unavailable(ApiError):
    """Ours, not the caller's: Google retries a 5xx."""

    status = 503


@dataclass(frozen=True)
class GoogleCallbacks:
    """What handling a callback needs."""

    nonces: GoogleNonces
    passes: IssuerReads
    clock: Clock
    issuer_id: str
    root_keys: RootKeySource


def root_keys_from(settings: EventsSettings) -> RootKeySource:
    """The configured root keys: the file's (a bad one stops the service at start, naming the
    problem) or, without one, those fetched from the URL."""
    return root_key_source(
        settings.google_root_keys_path,
        settings.google_root_keys_url,
        settings.request_timeout_seconds,
    )


async def handle_callback(callbacks: GoogleCallbacks, body: bytes) -> PassEventMessage | None:
    """Verify a callback and record its pass event: the event, or None when the callback is
    acknowledged without one (a repeated nonce, an unknown eventType). Raises an ApiError for
    every refusal."""
    now = callbacks.clock.now()
    try:
        # Parsed before the keys are asked for: a body that is no callback never fetches them.
        envelope = parse_callback(body)
        root_keys = await _root_keys(callbacks, now)
        message = verify_envelope(
            envelope, root_keys=root_keys, issuer_id=callbacks.issuer_id, now=now
        )
    except CallbackRejected as exc:
        log.warning("refused a Google Wallet callback (%s): %s", exc.reason, exc)
        raise _refusal(exc) from None
    event_type = _EVENT_TYPES.get(message.event_type)
    if event_type is None:
        log.warning(
            "acknowledged a Google Wallet callback with an eventType Tessera does not know "
            "(%.40r) for %s; nothing recorded",
            message.event_type,
            message.object_id,
        )
        return None
    return await _record(callbacks, message, event_type, now)


async def _root_keys(callbacks: GoogleCallbacks, now: datetime) -> list[RootKey]:
    try:
        return await callbacks.root_keys.keys(now)
    except RootKeysUnavailable as exc:
        log.warning("Google Wallet callback not verified: %s", exc)
        raise Unavailable(
            "Google's root signing keys are not available; retry later.",
            code="google_root_keys_unavailable",
        ) from None


async def _record(
    callbacks: GoogleCallbacks, message: SignedMessage, event_type: PassEventType, now: datetime
) -> PassEventMessage | None:
    pass_id = pass_id_of(callbacks.issuer_id, message.object_id)
    record = None if pass_id is None else await callbacks.passes.pass_by_id(pass_id)
    if pass_id is None or record is None:
        log.warning("Google Wallet callback for unknown object %s", message.object_id)
        raise NotFound(f"No such pass object: '{message.object_id}'", code="resource_missing")
    event = pass_event(record, event_type, {"wallet": "google"}, now)
    expires_at = max(message.expires_at, now) + NONCE_RETENTION_MARGIN
    try:
        fresh = await callbacks.nonces.record(dedupe_key(message), event, expires_at)
    except PyMongoError as exc:
        # Nothing was written, so Google's retry records this callback once.
        log.exception("could not record the %s event of %s", event_type, pass_id)
        raise Unavailable("The event could not be recorded; retry later.") from exc
    if not fresh:
        log.info("Google Wallet callback for %s delivered again; recorded once", pass_id)
        return None
    return event


def dedupe_key(message: SignedMessage) -> str:
    """What makes two deliveries of a callback one: its nonce, or, for a message without one
    (or with a nonce too long to be Google's), the digest of its signed text, which a repeated
    delivery repeats byte for byte."""
    if 0 < len(message.nonce) <= _MAX_NONCE_LENGTH:
        return message.nonce
    return f"sha256:{message.digest}"


def _refusal(exc: CallbackRejected) -> ApiError:
    """400 for a body that is not a callback at all; 401 for one that fails authentication."""
    code = f"google_callback_{exc.reason}"
    if isinstance(exc, MalformedCallback | WrongProtocol):
        return InvalidRequest(f"Not a Google Wallet callback: {exc}.", code=code)
    return AuthenticationError(f"The Google Wallet callback was refused: {exc}.", code=code)
