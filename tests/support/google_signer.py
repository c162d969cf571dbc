"""A stand-in for Google's callback signer: a root key, an intermediate key it signs, and
callbacks signed the way Google signs them (ECv2SigningOnly, as Tink's PaymentMethodTokenSender
builds them), with knobs to get each detail wrong.

The signing is written from the protocol, independently of services/events/google_verify.py:
signatures are ECDSA P-256 SHA-256 (DER) over 4-byte little-endian length-prefixed parts.
"""

import base64
import json
import secrets
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

SENDER_ID = "GooglePayPasses"
PROTOCOL = "ECv2SigningOnly"
HOUR_MS = 3_600_000


def now_ms() -> int:
    return int(time.time() * 1000)


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _spki_b64(key: ec.EllipticCurvePrivateKey) -> str:
    der = key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return base64.b64encode(der).decode()


def _length_value(*parts: str) -> bytes:
    return b"".join(struct.pack("<I", len(p.encode())) + p.encode() for p in parts)


def _sign(key: ec.EllipticCurvePrivateKey, data: bytes) -> str:
    return base64.b64encode(key.sign(data, ec.ECDSA(hashes.SHA256()))).decode()


@dataclass
class GoogleSigner:
    root: ec.EllipticCurvePrivateKey = field(default_factory=_key)
    intermediate: ec.EllipticCurvePrivateKey = field(default_factory=_key)

    def root_keys(self, expires_ms: int | None = None) -> dict[str, Any]:
        """The root key in Google's key-list format (what `GOOGLE_ROOT_KEYS_PATH` holds)."""
        expiration = expires_ms if expires_ms is not None else now_ms() + 24 * HOUR_MS
        entry = {"keyValue": _spki_b64(self.root), "protocolVersion": PROTOCOL}
        return {"keys": [entry | {"keyExpiration": str(expiration)}]}

    def write_root_keys(self, path: Path) -> Path:
        path.write_text(json.dumps(self.root_keys()))
        return path

    def callback(
        self,
        *,
        recipient_id: str,
        object_id: str,
        class_id: str | None = None,
        event_type: str = "save",
        nonce: str | None = None,
        exp_ms: int | None = None,
        key_exp_ms: int | None = None,
        sender_id: str = SENDER_ID,
        protocol: str = PROTOCOL,
        intermediate_signer: ec.EllipticCurvePrivateKey | None = None,
        message: dict[str, Any] | None = None,
        signed_key_extra: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """A callback body as a dict; `intermediate_signer` replaces the root as signer,
        `signed_key_extra` adds keys to the signed intermediate key."""
        signed_message = json.dumps(
            message
            if message is not None
            else {
                "classId": class_id or f"{recipient_id}.tmpl_class",
                "objectId": object_id,
                "expTimeMillis": exp_ms if exp_ms is not None else now_ms() + HOUR_MS,
                "eventType": event_type,
                "nonce": nonce or secrets.token_urlsafe(16),
            }
        )
        signed_key = json.dumps(
            {
                "keyValue": _spki_b64(self.intermediate),
                "keyExpiration": str(key_exp_ms if key_exp_ms is not None else now_ms() + HOUR_MS),
            }
            | (signed_key_extra or {})
        )
        key_signer = intermediate_signer or self.root
        return {
            "protocolVersion": protocol,
            "signature": _sign(
                self.intermediate, _length_value(sender_id, recipient_id, protocol, signed_message)
            ),
            "intermediateSigningKey": {
                "signedKey": signed_key,
                "signatures": [_sign(key_signer, _length_value(sender_id, protocol, signed_key))],
            },
            "signedMessage": signed_message,
        }

    def body(self, **kwargs: Any) -> bytes:
        return json.dumps(self.callback(**kwargs)).encode()
