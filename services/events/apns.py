"""The APNs provider client: the content-free pushes that tell Apple Wallet a pass changed.

A Wallet push is `POST {apns_url}/3/device/<push token>` over HTTP/2 with `apns-topic` set to
the pass type identifier and the body `{}`; the device then asks the web service what changed
(registrations.py). It is sent as a background push (`apns-push-type: background`, which
watchOS requires, with priority 5, the only priority Apple allows for it).

Authentication is the pass type certificate as the TLS client certificate (the default), or a
provider token: an ES256 JWT signed with a .p8 key, renewed every 30 minutes (APNs refuses
tokens older than an hour and answers 429 to tokens renewed more often than every 20 minutes).
"""

import contextlib
import os
import ssl
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote

import httpx2
import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from services.events.config import EventsSettings
from shared.apple_identity import SigningIdentity, load_apple_identity

TOKEN_LIFETIME_SECONDS = 30 * 60
# 400 reasons that say the token itself can never be pushed for this topic: made up (a device
# registered with a token APNs never issued), or a token of another pass type.
INVALID_TOKEN_REASONS = frozenset({"BadDeviceToken", "DeviceTokenNotForTopic"})


@dataclass(frozen=True)
class PushResult:
    """APNs' answer to one push; `status` None when no answer came (network, timeout)."""

    status: int | None
    reason: str | None = None
    # With 410: when APNs learned that the token is no longer valid for the topic.
    inactive_since: datetime | None = None

    @property
    def delivered(self) -> bool:
        return self.status == 200

    @property
    def unregistered(self) -> bool:
        """The token is dead (410) or invalid (400 BadDeviceToken, DeviceTokenNotForTopic):
        its registrations are dropped."""
        return self.status == 410 or (self.status == 400 and self.reason in INVALID_TOKEN_REASONS)

    @property
    def transient(self) -> bool:
        """No answer (a connection lost, a timeout) or APNs' own failure (500, 503): worth
        another try shortly. Not a 429: that device token is pushed too often, and the next
        update pushes it again anyway."""
        return self.status is None or self.status in (500, 503)

    @property
    def outcome(self) -> str:
        """The result label of tessera_apns_pushes_total."""
        if self.delivered:
            return "success"
        if self.unregistered:
            return "unregistered"
        return "error" if self.status is None else "rejected"


class ProviderToken:
    """The `authorization: bearer <jwt>` of token-based APNs authentication."""

    def __init__(self, key_pem: bytes, key_id: str, team_id: str):
        key = serialization.load_pem_private_key(key_pem, password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise ValueError("the APNs .p8 key must be an elliptic-curve (ES256) key")
        self._key = key
        self._key_id = key_id
        self._team_id = team_id
        self._issued_at = 0.0
        self._token = ""

    def current(self) -> str:
        now = time.time()
        if now - self._issued_at >= TOKEN_LIFETIME_SECONDS:
            self._token = jwt.encode(
                {"iss": self._team_id, "iat": int(now)},
                self._key,
                algorithm="ES256",
                headers={"kid": self._key_id},
            )
            self._issued_at = now
        return self._token


class ApnsClient:
    def __init__(
        self,
        base_url: str,
        topic: str,
        tls: ssl.SSLContext,
        token: ProviderToken | None,
        timeout_seconds: float,
    ):
        self.topic = topic
        self._token = token
        self._client = httpx2.AsyncClient(
            base_url=base_url.rstrip("/"), http2=True, verify=tls, timeout=timeout_seconds
        )

    async def push(self, push_token: str) -> PushResult:
        headers = {
            "apns-topic": self.topic,
            "apns-push-type": "background",
            "apns-priority": "5",
        }
        if self._token is not None:
            headers["authorization"] = f"bearer {self._token.current()}"
        try:
            response = await self._client.post(
                f"/3/device/{quote(push_token, safe='')}", content=b"{}", headers=headers
            )
        except httpx2.HTTPError as exc:
            return PushResult(None, f"{type(exc).__name__}: {exc}")
        return _result(response)

    async def aclose(self) -> None:
        await self._client.aclose()


def _result(response: httpx2.Response) -> PushResult:
    if response.status_code == 200:
        return PushResult(200)
    reason: str | None = None
    inactive_since: datetime | None = None
    with contextlib.suppress(ValueError, TypeError, AttributeError):
        body = response.json()
        reason = body.get("reason")
        if isinstance(body.get("timestamp"), int):
            inactive_since = datetime.fromtimestamp(body["timestamp"] / 1000, UTC)
    return PushResult(response.status_code, reason, inactive_since)


def tls_context(identity: SigningIdentity | None, ca_path: Path | None) -> ssl.SSLContext:
    """TLS for APNs: the system's CAs (or `ca_path`), and the pass certificate as client
    certificate unless `identity` is None (token authentication)."""
    context = ssl.create_default_context(cafile=str(ca_path) if ca_path else None)
    if identity is not None:
        _load_client_certificate(context, identity)
    return context


def _load_client_certificate(context: ssl.SSLContext, identity: SigningIdentity) -> None:
    # ssl only loads a certificate chain from a file: write it to a private temporary file for
    # the moment of loading (the key may have come from a .p12 or an encrypted PEM).
    chain = b"".join(
        (
            identity.certificate.public_bytes(serialization.Encoding.PEM),
            identity.intermediate.public_bytes(serialization.Encoding.PEM),
            identity.private_key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            ),
        )
    )
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "apns-client.pem"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as file:
            file.write(chain)
        context.load_cert_chain(path)


def create_apns_client(settings: EventsSettings) -> ApnsClient:
    """The client for the configured authentication: a provider token, or else the pass type
    certificate (the development one under `{data_dir}/signing/` when none is configured)."""
    token: ProviderToken | None = None
    identity: SigningIdentity | None = None
    if settings.apns_key_path is not None:
        # EventsSettings only accepts the three token settings together.
        assert settings.apns_key_id
        assert settings.apns_team_id
        token = ProviderToken(
            settings.apns_key_path.read_bytes(), settings.apns_key_id, settings.apns_team_id
        )
    else:
        identity = load_apple_identity(settings)
    return ApnsClient(
        settings.apns_url,
        settings.pass_type_identifier,
        tls_context(identity, settings.apns_ca_path),
        token,
        settings.apns_timeout_seconds,
    )
