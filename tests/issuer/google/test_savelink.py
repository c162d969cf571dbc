"""The save link's JWT, verified by google-auth (Google's implementation, not ours)."""

import base64
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from google.auth import crypt
from google.auth import jwt as google_jwt

from services.issuer.google.identity import GoogleIdentity, ensure_dev_google_identity
from services.issuer.google.savelink import SAVE_URL_PREFIX, object_reference, save_url
from tests.issuer.google.samples import sample_class, sample_object

ORIGINS = ["https://tessera.example.com"]


def _token(url: str) -> str:
    assert url.startswith(SAVE_URL_PREFIX)
    token = url.removeprefix(SAVE_URL_PREFIX)
    assert "/" not in token
    assert "?" not in token
    return token


def _b64decode(segment: str) -> bytes:
    return base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))


def _signature_valid(public_key_pem: bytes, token: str) -> bool:
    signed_part, _, signature = token.rpartition(".")
    verifier = crypt.RSAVerifier.from_string(public_key_pem)
    return bool(verifier.verify(signed_part.encode(), _b64decode(signature)))


def _verified_claims(identity: GoogleIdentity, url: str) -> dict[str, Any]:
    # Google's save JWT has no `exp` claim, and google.auth.jwt.decode(verify=True) insists on
    # one; so the signature is checked with google-auth's RSAVerifier, then claims are read.
    token = _token(url)
    assert _signature_valid(identity.public_key_pem(), token)
    claims: dict[str, Any] = google_jwt.decode(token, verify=False)
    assert claims["aud"] == "google"
    return claims


def _header(token: str) -> dict[str, Any]:
    encoded = token.split(".")[0]
    header: dict[str, Any] = json.loads(_b64decode(encoded))
    return header


def test_fat_link_verifies_and_carries_class_and_object(identity: GoogleIdentity) -> None:
    resource_class = sample_class(identity, "event")
    resource = sample_object(identity, "event")
    issued = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)

    url = save_url(
        identity,
        origins=ORIGINS,
        vertical="eventTicket",
        objects=[resource],
        classes=[resource_class],
        now=issued,
    )

    claims = _verified_claims(identity, url)
    assert claims["iss"] == identity.client_email
    assert claims["aud"] == "google"
    assert claims["typ"] == "savetowallet"
    assert claims["iat"] == int(issued.timestamp())
    assert claims["origins"] == ORIGINS
    assert claims["payload"] == {
        "eventTicketObjects": [resource],
        "eventTicketClasses": [resource_class],
    }
    assert _header(_token(url)) == {"alg": "RS256", "kid": identity.private_key_id, "typ": "JWT"}


def test_signature_verifies_with_rsa_verifier(identity: GoogleIdentity) -> None:
    url = save_url(
        identity, origins=ORIGINS, vertical="generic", objects=[sample_object(identity, "generic")]
    )
    signed_part, _, signature = _token(url).rpartition(".")
    verifier = crypt.RSAVerifier.from_string(identity.public_key_pem())
    raw_signature = _b64decode(signature)

    assert verifier.verify(signed_part.encode(), raw_signature)
    assert not verifier.verify(signed_part.encode() + b"x", raw_signature)
    # google-auth's own dispatcher, which tries each given public key.
    assert crypt.verify_signature(
        signed_part.encode(), raw_signature, [identity.public_key_pem().decode()]
    )


def test_skinny_link_holds_only_ids(identity: GoogleIdentity) -> None:
    resource = sample_object(identity, "loyalty")

    url = save_url(
        identity, origins=ORIGINS, vertical="loyalty", objects=[object_reference(resource)]
    )

    payload = _verified_claims(identity, url)["payload"]
    assert payload == {"loyaltyObjects": [{"id": resource["id"], "classId": resource["classId"]}]}
    fat = save_url(identity, origins=ORIGINS, vertical="loyalty", objects=[resource])
    assert len(url) < len(fat)


def test_iat_defaults_to_now(identity: GoogleIdentity) -> None:
    before = int(datetime.now(UTC).timestamp())
    url = save_url(
        identity, origins=ORIGINS, vertical="offer", objects=[sample_object(identity, "coupon")]
    )
    after = int(datetime.now(UTC).timestamp())
    assert before <= _verified_claims(identity, url)["iat"] <= after


def test_tampered_payload_is_rejected(identity: GoogleIdentity) -> None:
    url = save_url(
        identity, origins=ORIGINS, vertical="offer", objects=[sample_object(identity, "coupon")]
    )
    header, payload, signature = _token(url).split(".")
    claims = json.loads(_b64decode(payload))
    claims["origins"] = ["https://evil.example"]
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()

    assert _signature_valid(identity.public_key_pem(), f"{header}.{payload}.{signature}")
    assert not _signature_valid(identity.public_key_pem(), f"{header}.{forged}.{signature}")


def test_another_key_does_not_verify(identity: GoogleIdentity, tmp_path: Path) -> None:
    other = ensure_dev_google_identity(tmp_path)
    url = save_url(
        other, origins=ORIGINS, vertical="generic", objects=[sample_object(other, "generic")]
    )
    assert _signature_valid(other.public_key_pem(), _token(url))
    assert not _signature_valid(identity.public_key_pem(), _token(url))


@pytest.mark.parametrize(
    ("vertical", "objects", "message"),
    [
        ("transit", [{"id": "1.a"}], "vertical must be one of"),
        ("eventTicketObjects", [{"id": "1.a"}], "vertical must be one of"),
        ("generic", [], "at least one object"),
    ],
)
def test_bad_arguments_are_refused(
    identity: GoogleIdentity, vertical: str, objects: list[dict[str, Any]], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        save_url(identity, origins=ORIGINS, vertical=vertical, objects=objects)
