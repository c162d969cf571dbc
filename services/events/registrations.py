"""Apple Wallet's pass web service, the logic behind wallet_endpoints.py: registrations, the
serial numbers updated since a tag, the latest version of a pass, and the removal of the
registrations whose push token APNs refused for good (when push.py pushes a pass).

Apple's reference authenticates the calls about one pass with the pass's authenticationToken
(`Authorization: ApplePass <token>`) and the serial listing with the device library identifier.
Every way a pass call can fail to name a pass (no or malformed header, unknown serial, another
pass type, wrong token) is the same 401 after a constant-time comparison, so a caller without
the token learns nothing about whether a serial number exists.

A pass takes at most `max_devices` registrations (403 past it; a device already registered
renews with 200 as always): a pass file in the wrong hands must not register thousands of
devices, each an event, a webhook and a push on every update. A voided pass registers like any
other (201, then 200): Apple's reference lists only 200, 201 and 401 for this call, Wallet
retries a registration answered otherwise, and a registered device that holds an older copy
gets the voided version through the serial listing (docs/wallet-callbacks.md).

Events: a new registration records `installed`, an unregistration `removed`, a 200 for an
updated pass `updated` with stage `delivered`. Each goes to the service's outbox: a
registration's and an unregistration's in the same transaction as the write, so neither can
happen without the other (docs/wallet-callbacks.md).
"""

import hmac
import logging
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from services.events.repository import (
    TAG_RETENTION,
    Registrations,
    device_hash,
    registration_id,
)
from services.events.update_tags import (
    INLINE_MAX_LENGTH,
    STORED_TAG_VERSION,
    changed_since,
    decode_tag,
    encode_tag,
    not_modified,
    stored_tag_id,
)
from services.issuer.reads import IssuerReads
from shared.clock import Clock
from shared.json_input import UntrustedJsonError, loads_untrusted
from shared.messages import PassEventMessage, PassEventType
from shared.models import PassRecord
from shared.outbox import Outbox
from shared.pass_events import pass_event

log = logging.getLogger(__name__)

# Push tokens go into the APNs request path: only what a hex (or base64-free) token can hold.
# Used with fullmatch: `$` alone would let a trailing newline through.
_PUSH_TOKEN = re.compile(r"[0-9A-Za-z]{8,512}")
DEFAULT_MAX_DEVICES_PER_PASS = 20
# Why a registration went without the device asking: APNs said its token is dead (410), or that
# it never was one for this pass type (400 BadDeviceToken, DeviceTokenNotForTopic).
DropReason = Literal["push_token_inactive", "push_token_invalid"]
# Compared against when the serial is unknown, so that case costs what a wrong token costs.
_NO_TOKEN = "-" * 32
# A longer tag (130,000 passes on one device) is not kept: KEPT_TAGS of them must fit in a
# document. The device gets a tag that lists everything next time, as none would.
MAX_KEPT_TAG_LENGTH = 2 * 1024 * 1024


@dataclass(frozen=True)
class LatestPass:
    status: int  # 200, 304 or 401
    data: bytes = b""
    last_modified: datetime | None = None
    # Set on a 200 for a pass that was updated since it was issued: record the delivery.
    delivered: PassRecord | None = None
    version: int = 0


@dataclass(frozen=True)
class Serials:
    serial_numbers: list[str]
    last_updated: str


def _device_id(device: str) -> str:
    """How events name a device: a digest, never the identifier (it is a shared secret)."""
    return device[:32]


class AppleWebService:
    def __init__(
        self,
        registrations: Registrations,
        issuer: IssuerReads,
        outbox: Outbox,
        clock: Clock,
        max_devices: int = DEFAULT_MAX_DEVICES_PER_PASS,
    ):
        self._registrations = registrations
        self._issuer = issuer
        self._outbox = outbox
        self._clock = clock
        self._max_devices = max_devices

    async def authenticate(
        self, pass_type: str, serial: str, authorization: str | None
    ) -> PassRecord | None:
        """The pass these path parameters and this ApplePass token name, or None (401)."""
        presented = _apple_token(authorization)
        record = None if presented is None else await self._issuer.pass_by_serial(serial)
        expected = _NO_TOKEN if record is None else record.authentication_token
        matches = hmac.compare_digest((presented or "").encode(), expected.encode())
        if record is None or not matches or await self._pass_type(record) != pass_type:
            return None
        return record

    async def register(
        self, device: str, pass_type: str, serial: str, authorization: str | None, body: bytes
    ) -> int:
        record = await self.authenticate(pass_type, serial, authorization)
        if record is None:
            return 401
        push_token = _push_token(body)
        if push_token is None:
            return 400
        now = self._clock.now()
        hashed = device_hash(device)
        key = registration_id(device, pass_type, serial)
        document = {
            "_id": key,
            "device": hashed,
            "pass_type": pass_type,
            "serial_number": serial,
            "pass_id": record.id,
            "account_id": record.account_id,
            "mode": record.mode,
            "push_token": push_token,
            "created_at": now,
            "updated_at": now,
        }
        installed = self._event(record, "installed", _metadata(hashed))
        outcome = await self._registrations.register(document, self._max_devices, installed)
        if outcome == "full":
            # 403, not 429 or 5xx: the cap does not lift with time, and Wallet should not retry.
            log.info("refused a device for %s: it has %d already", record.id, self._max_devices)
            return 403
        await self._registrations.renew_push_token(hashed, pass_type, push_token, now)
        return 200 if outcome == "renewed" else 201

    async def unregister(
        self, device: str, pass_type: str, serial: str, authorization: str | None
    ) -> int:
        record = await self.authenticate(pass_type, serial, authorization)
        if record is None:
            return 401
        removed = self._event(record, "removed", _metadata(device_hash(device)))
        # Not registered (any more): the device's wish holds already, and nothing is recorded.
        await self._registrations.unregister(registration_id(device, pass_type, serial), removed)
        return 200

    async def updated_serials(
        self, device: str, pass_type: str, since: str | None
    ) -> Serials | None:
        """The serials of the device's passes changed since the tag; None when none (204)."""
        hashed = device_hash(device)
        registered = await self._registrations.of_device(hashed, pass_type)
        if not registered:
            return None
        found = await self._issuer.pass_versions([doc["pass_id"] for doc in registered])
        versions = dict(found.values())
        changed = changed_since(versions, await self._known(hashed, pass_type, since))
        if not changed:
            return None
        return Serials(changed, await self._tag(hashed, pass_type, versions))

    async def _known(self, device: str, pass_type: str, tag: str | None) -> dict[str, int] | None:
        """The versions a tag the device sent stands for (update_tags.py); None: list all."""
        if tag is None or not tag.startswith(STORED_TAG_VERSION):
            return decode_tag(tag)
        tag_id = tag.removeprefix(STORED_TAG_VERSION)
        kept = await self._registrations.kept_tag(device, pass_type, tag_id)
        return decode_tag(kept, max_length=MAX_KEPT_TAG_LENGTH)

    async def _tag(self, device: str, pass_type: str, versions: dict[str, int]) -> str:
        """The tag to hand out for these versions: itself when short, else the id it is kept
        under."""
        tag = encode_tag(versions)
        if len(tag) <= INLINE_MAX_LENGTH:
            return tag
        tag_id = stored_tag_id(tag)
        if len(tag) <= MAX_KEPT_TAG_LENGTH:
            expires_at = self._clock.now() + TAG_RETENTION
            await self._registrations.keep_tag(device, pass_type, tag_id, tag, expires_at)
        else:
            log.warning("%d passes on one device: its update tag is not kept", len(versions))
        return STORED_TAG_VERSION + tag_id

    async def latest_pass(
        self, pass_type: str, serial: str, authorization: str | None, if_modified_since: str | None
    ) -> LatestPass:
        record = await self.authenticate(pass_type, serial, authorization)
        stored = None if record is None else await self._issuer.pass_file(record.id)
        if record is None or stored is None:
            return LatestPass(401)
        stamp = stored.last_modified
        if not_modified(if_modified_since, stamp):
            return LatestPass(304, last_modified=stamp)
        delivered = record if stored.version > 1 else None
        return LatestPass(200, stored.data, stamp, delivered, stored.version)

    async def record_delivery(self, record: PassRecord, version: int) -> None:
        """An updated pass reached a device (the GET has no device identifier to name)."""
        metadata = {
            "stage": "delivered",
            "wallet": "apple",
            "serial_number": record.serial_number,
            "version": version,
        }
        event = self._event(record, "updated", metadata)
        try:
            await self._outbox.add(event, event.created_at)
        except Exception:
            log.exception("could not record the delivery of %s", record.id)

    async def drop_push_token(
        self, pass_type: str, push_token: str, inactive_since: datetime | None, reason: DropReason
    ) -> int:
        """Remove the registrations (of every pass) that use a push token APNs refused for good,
        except any renewed after `inactive_since`, each with its `removed` event; how many."""
        still, using = await self._registrations.using_push_token(
            pass_type, push_token, inactive_since
        )
        dropped = 0
        for document in using:
            record = await self._issuer.pass_by_id(document["pass_id"])
            metadata = _metadata(document["device"]) | {"reason": reason}
            removed = None if record is None else self._event(record, "removed", metadata)
            if await self._registrations.unregister(document["_id"], removed, still) is not None:
                dropped += 1
        return dropped

    def _event(
        self, record: PassRecord, event_type: PassEventType, metadata: dict[str, Any]
    ) -> PassEventMessage:
        return pass_event(record, event_type, metadata, self._clock.now())

    async def _pass_type(self, record: PassRecord) -> str | None:
        meta = await self._issuer.pass_file_meta(record.id)
        return None if meta is None else meta.pass_type_identifier


def _metadata(device: str) -> dict[str, Any]:
    return {"wallet": "apple", "device_id": _device_id(device)}


def _apple_token(authorization: str | None) -> str | None:
    scheme, _, token = (authorization or "").partition(" ")
    token = token.strip()
    return token if scheme.lower() == "applepass" and token else None


def _push_token(body: bytes) -> str | None:
    try:
        parsed = loads_untrusted(body)
    except UntrustedJsonError as exc:
        log.info("refused a registration body: %s", exc.reason)
        return None
    token = parsed.get("pushToken") if isinstance(parsed, dict) else None
    if not isinstance(token, str) or not _PUSH_TOKEN.fullmatch(token):
        log.info("refused a registration body: no valid pushToken")
        return None
    return token
