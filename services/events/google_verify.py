"""Verifying Google Wallet's signed save/delete callbacks (protocol `ECv2SigningOnly`).

Google signs a callback the way it signs a Google Pay token, without the encryption. The body:

    {"protocolVersion": "ECv2SigningOnly",
     "intermediateSigningKey": {"signedKey": "<JSON text: keyValue, keyExpiration>",
                                "signatures": ["<base64 DER ECDSA>", ...]},
     "signature": "<base64 DER ECDSA>",
     "signedMessage": "<JSON text: classId, objectId, expTimeMillis, eventType, nonce>"}

is accepted when, in this order (each failure has its own exception):

0. the four keys above are there (`parse_callback`); keys besides them, in the body, in
   intermediateSigningKey, in signedKey or in signedMessage, are ignored: nothing unsigned is
   read, and a callback refused with a 4xx is never sent again (docs/wallet-callbacks.md);
1. one of `signatures` verifies under one of Google's unexpired root signing keys over
   length-value(sender id, "ECv2SigningOnly", signedKey);
2. signedKey's `keyExpiration` (milliseconds since the epoch) is in the future;
3. `signature` verifies under signedKey's `keyValue` over
   length-value(sender id, recipient id = our issuer id, "ECv2SigningOnly", signedMessage);
4. the message's objectId (and classId, when there is one) belong to our issuer id, and
   `expTimeMillis` is in the future. `eventType` and `nonce` are returned as they are, whatever
   they hold: what to do with them is google_events.py's decision.

Length-value: each part as its UTF-8 byte length (4 bytes, little-endian), then the bytes. All
signatures are ECDSA over P-256 with SHA-256, DER-encoded; keys are base64 DER
SubjectPublicKeyInfo. This is what Tink's Java `PaymentMethodTokenRecipient` does, which
Google's guide recommends; Tink's Python package has no payment-method-token module, so the
steps are written out here with `cryptography`, checked by tests/events/test_google_verify.py.
"""

import base64
import binascii
import hashlib
import json
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from shared.json_input import UntrustedJsonError, loads_untrusted

PROTOCOL_VERSION: Final = "ECv2SigningOnly"
# Google's guides name the sender "GooglePayPasses" (and Tink's sample does); newer pages of the
# same guide write "GoogleWalletPasses". Both name the passes callbacks, so both are accepted.
SENDER_IDS: Final = ("GooglePayPasses", "GoogleWalletPasses")
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_BODY_KEYS: Final = ("protocolVersion", "signature", "intermediateSigningKey", "signedMessage")
# Signatures of the intermediate key a callback may carry (Google sends one per root key in
# use, a handful at most while it rotates them).
MAX_KEY_SIGNATURES: Final = 8


@dataclass(frozen=True)
class RootKey:
    """One of Google's root signing keys; it signs intermediate keys until `expires_at`."""

    public_key: ec.EllipticCurvePublicKey
    expires_at: datetime


@dataclass(frozen=True)
class Envelope:
    """A callback body's parts, parsed but not yet verified."""

    signed_key: str
    key_signatures: list[bytes]
    signature: bytes
    signed_message: str


@dataclass(frozen=True)
class SignedMessage:
    """A verified callback. `event_type` is Google's `eventType` (`save`: added to a wallet,
    `del`: removed, or a type Google added since; "" when absent), `nonce` its nonce ("" when
    absent or not a string), `digest` the SHA-256 of the signed message text (hex)."""

    class_id: str | None
    object_id: str
    event_type: str
    nonce: str
    expires_at: datetime
    digest: str


class CallbackRejected(Exception):
    """A callback that must not be acted on; `reason` is a stable, loggable code."""

    reason = "rejected"


class MalformedCallback(CallbackRejected):
    reason = "malformed"


class WrongProtocol(CallbackRejected):
    reason = "wrong_protocol"


class NoValidIntermediateSignature(CallbackRejected):
    reason = "bad_intermediate_signature"


class IntermediateKeyExpired(CallbackRejected):
    reason = "intermediate_key_expired"


class BadMessageSignature(CallbackRejected):
    reason = "bad_message_signature"


class WrongRecipient(CallbackRejected):
    reason = "wrong_recipient"


class MessageExpired(CallbackRejected):
    reason = "message_expired"


def verify_callback(
    body: bytes,
    *,
    root_keys: Sequence[RootKey],
    issuer_id: str,
    now: datetime,
    sender_ids: Sequence[str] = SENDER_IDS,
) -> SignedMessage:
    """The verified message of a callback body, or a `CallbackRejected` subclass saying why not."""
    envelope = parse_callback(body)
    return verify_envelope(
        envelope, root_keys=root_keys, issuer_id=issuer_id, now=now, sender_ids=sender_ids
    )


def parse_callback(body: bytes) -> Envelope:
    """A body's envelope (step 0), before any key is needed; `MalformedCallback` or
    `WrongProtocol` when it is not a callback at all.

    Tink's recipient requires exactly the four keys of the body and exactly signedKey and
    signatures in intermediateSigningKey; here other keys are ignored there too. They are
    unsigned and never read, so they cannot change what is verified, and Google does not retry
    a callback answered with a 4xx: refusing one for a key Google added would lose it.
    """
    envelope = _object(_json(body, "body"), "body")
    missing = [key for key in _BODY_KEYS if key not in envelope]
    if missing:
        raise MalformedCallback(f"the body lacks {', '.join(missing)}")
    if envelope["protocolVersion"] != PROTOCOL_VERSION:
        raise WrongProtocol(f"protocolVersion must be {PROTOCOL_VERSION!r}")
    intermediate = _object(envelope["intermediateSigningKey"], "intermediateSigningKey")
    if "signedKey" not in intermediate or "signatures" not in intermediate:
        raise MalformedCallback("intermediateSigningKey must have signedKey and signatures")
    signatures = intermediate["signatures"]
    if not isinstance(signatures, list) or not signatures:
        raise MalformedCallback("intermediateSigningKey.signatures must be a non-empty list")
    if len(signatures) > MAX_KEY_SIGNATURES:
        # Each is verified under every root key for each sender id, unauthenticated: a body of
        # thousands of them held the event loop for about a second.
        raise MalformedCallback(
            f"intermediateSigningKey.signatures has more than {MAX_KEY_SIGNATURES} signatures"
        )
    return Envelope(
        signed_key=_string(intermediate["signedKey"], "signedKey"),
        key_signatures=[
            _base64(_string(item, "signatures[]"), "signatures[]") for item in signatures
        ],
        signature=_base64(_string(envelope["signature"], "signature"), "signature"),
        signed_message=_string(envelope["signedMessage"], "signedMessage"),
    )


def verify_envelope(
    envelope: Envelope,
    *,
    root_keys: Sequence[RootKey],
    issuer_id: str,
    now: datetime,
    sender_ids: Sequence[str] = SENDER_IDS,
) -> SignedMessage:
    """Steps 1 to 4 for a parsed envelope."""
    now_ms = _millis(now)
    roots = [root.public_key for root in root_keys if _millis(root.expires_at) > now_ms]
    signed_key = envelope.signed_key
    sender_id = _intermediate_sender(signed_key, envelope.key_signatures, roots, sender_ids)
    key_document = _object(_json(signed_key.encode(), "signedKey"), "signedKey")
    if _millis_field(key_document, "keyExpiration", "signedKey") <= now_ms:
        raise IntermediateKeyExpired("the intermediate signing key has expired")
    intermediate_key = public_key(_string(key_document.get("keyValue"), "signedKey.keyValue"))
    signed_message = envelope.signed_message
    signed = length_value(sender_id, issuer_id, PROTOCOL_VERSION, signed_message)
    if not _verifies(intermediate_key, envelope.signature, signed):
        # The recipient is only in the signed bytes, so a message for another issuer fails here
        # too; its (unverified) ids tell the two apart, for the operator's logs only.
        if not _ours(_unverified_message(signed_message), issuer_id):
            raise WrongRecipient("the message was signed for another issuer id")
        raise BadMessageSignature(
            "the message signature does not verify under the intermediate key"
        )
    message = _message(signed_message)
    if not _ours(message, issuer_id):
        raise WrongRecipient("the message names a class or object of another issuer")
    if _millis(message.expires_at) <= now_ms:
        raise MessageExpired("the message has expired (expTimeMillis)")
    return message


def load_root_keys(document: bytes) -> list[RootKey]:
    """Google's root signing keys file -> its `ECv2SigningOnly` keys.

    The format is Google's key list: {"keys": [{"keyValue": base64 DER SubjectPublicKeyInfo,
    "protocolVersion": ..., "keyExpiration": "<ms since the epoch>"}]}. Keys of other protocol
    versions, and keys without an expiration (as Tink does), are skipped. Raises ValueError,
    naming the problem, for a file with no usable key.
    """
    try:
        parsed = json.loads(document)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"the Google root keys file is not JSON: {exc}") from exc
    entries = parsed.get("keys") if isinstance(parsed, dict) else None
    if not isinstance(entries, list):
        raise ValueError('the Google root keys file must be {"keys": [...]}')
    keys = []
    for entry in entries:
        if not isinstance(entry, dict) or entry.get("protocolVersion") != PROTOCOL_VERSION:
            continue
        if "keyExpiration" not in entry:
            continue
        try:
            expires_at = _datetime(_millis_field(entry, "keyExpiration", "root key"))
            key = public_key(_string(entry.get("keyValue"), "root key keyValue"))
        except MalformedCallback as exc:
            raise ValueError(f"a Google root key is unusable: {exc}") from exc
        keys.append(RootKey(key, expires_at))
    if not keys:
        raise ValueError(f"the Google root keys file has no {PROTOCOL_VERSION} key")
    return keys


def length_value(*parts: str) -> bytes:
    """Each part as its 4-byte little-endian UTF-8 length, then its UTF-8 bytes."""
    out = bytearray()
    for part in parts:
        data = part.encode()
        out += struct.pack("<I", len(data)) + data
    return bytes(out)


def public_key(value: str) -> ec.EllipticCurvePublicKey:
    """A base64 DER SubjectPublicKeyInfo that must hold a P-256 key."""
    try:
        key = serialization.load_der_public_key(_base64(value, "key"))
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise MalformedCallback(f"not a DER public key: {exc}") from exc
    if not isinstance(key, ec.EllipticCurvePublicKey) or not isinstance(key.curve, ec.SECP256R1):
        raise MalformedCallback("signing keys must be ECDSA P-256 keys")
    return key


def _intermediate_sender(
    signed_key: str,
    signatures: list[bytes],
    roots: list[ec.EllipticCurvePublicKey],
    sender_ids: Sequence[str],
) -> str:
    """The sender id under which a root key signed the intermediate key."""
    for sender_id in sender_ids:
        signed = length_value(sender_id, PROTOCOL_VERSION, signed_key)
        for root in roots:
            if any(_verifies(root, signature, signed) for signature in signatures):
                return sender_id
    raise NoValidIntermediateSignature(
        "no signature of the intermediate signing key verifies under Google's unexpired root keys"
    )


def _message(signed_message: str) -> SignedMessage:
    # Only objectId (which pass) and expTimeMillis (without it a replay stays valid forever)
    # are required. An eventType or nonce that is missing or odd is the caller's to judge.
    document = _object(_json(signed_message.encode(), "signedMessage"), "signedMessage")
    class_id = document.get("classId")
    event_type = document.get("eventType")
    nonce = document.get("nonce")
    return SignedMessage(
        class_id=None if class_id is None else _string(class_id, "signedMessage.classId"),
        object_id=_string(document.get("objectId"), "signedMessage.objectId"),
        event_type=event_type if isinstance(event_type, str) else "",
        nonce=nonce if isinstance(nonce, str) else "",
        expires_at=_datetime(_millis_field(document, "expTimeMillis", "signedMessage")),
        digest=hashlib.sha256(signed_message.encode()).hexdigest(),
    )


def _ours(message: SignedMessage | None, issuer_id: str) -> bool:
    if message is None:
        return True
    prefix = f"{issuer_id}."
    class_ours = message.class_id is None or message.class_id.startswith(prefix)
    return message.object_id.startswith(prefix) and class_ours


def _unverified_message(signed_message: str) -> SignedMessage | None:
    try:
        return _message(signed_message)
    except MalformedCallback:
        return None


def _verifies(key: ec.EllipticCurvePublicKey, signature: bytes, data: bytes) -> bool:
    try:
        key.verify(signature, data, ec.ECDSA(hashes.SHA256()))
    except (InvalidSignature, ValueError):
        return False
    return True


def _json(data: bytes, what: str) -> Any:
    # Unverified bytes from the Internet (the signed parts are parsed before their signature is
    # checked too): no RecursionError, lone surrogate or 65-bit integer may reach past here.
    try:
        return loads_untrusted(data)
    except UntrustedJsonError as exc:
        raise MalformedCallback(f"{what} is not acceptable JSON ({exc.reason})") from None


def _object(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise MalformedCallback(f"{what} must be a JSON object")
    return value


def _string(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise MalformedCallback(f"{what} must be a non-empty string")
    return value


def _base64(value: str, what: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise MalformedCallback(f"{what} is not base64") from None


def _millis_field(document: dict[str, Any], key: str, what: str) -> int:
    # Google writes these as decimal strings ("1553109880808"); a JSON integer is accepted too.
    value = document.get(key)
    # At most 16 digits (2^53 has 16): int() refuses over 4,300 with a ValueError, a 500.
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 16:
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 2**53:
        raise MalformedCallback(f"{what}.{key} must be milliseconds since the epoch")
    return value


def _millis(moment: datetime) -> int:
    # Integer arithmetic, so a time read from milliseconds compares exactly.
    return (moment - _EPOCH) // timedelta(milliseconds=1)


def _datetime(millis: int) -> datetime:
    try:
        return _EPOCH + timedelta(milliseconds=millis)
    except OverflowError:
        raise MalformedCallback("a timestamp is out of range") from None
