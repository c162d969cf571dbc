"""The APNs client against the local fake: HTTP/2, the pass certificate as TLS client
certificate, Wallet's headers and body, and the answers the pusher acts on (200, 410, others)."""

from collections.abc import Iterator
from pathlib import Path

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from services.events.apns import (
    ApnsClient,
    ProviderToken,
    PushResult,
    create_apns_client,
    tls_context,
)
from services.events.config import EventsSettings
from shared.apple_identity import SigningIdentity, ensure_dev_identity
from tests.support.fake_apns import FakeApns, running_fake_apns

TOKEN = "ab" * 32


@pytest.fixture
def signing(tmp_path: Path) -> SigningIdentity:
    return ensure_dev_identity(tmp_path / "signing")


@pytest.fixture
def fake(tmp_path: Path, signing: SigningIdentity) -> Iterator[FakeApns]:
    with running_fake_apns(tmp_path / "signing" / "root-ca.pem", tmp_path) as running:
        yield running


def _client(fake: FakeApns, identity: SigningIdentity | None, topic: str) -> ApnsClient:
    tls = tls_context(identity, fake.server_ca_path)
    return ApnsClient(fake.url, topic, tls, None, timeout_seconds=5)


async def test_a_push_is_http2_with_the_pass_certificate_topic_and_empty_body(
    fake: FakeApns, signing: SigningIdentity
) -> None:
    client = _client(fake, signing, "pass.dev.tessera")
    try:
        result = await client.push(TOKEN)
    finally:
        await client.aclose()
    assert result.delivered
    (push,) = fake.pushes(TOKEN)
    assert push.method == "POST"
    assert push.body == b"{}"
    assert push.client_uid == "pass.dev.tessera"
    assert push.headers["apns-topic"] == "pass.dev.tessera"
    assert push.headers["apns-push-type"] == "background"
    assert push.headers["apns-priority"] == "5"


async def test_410_reports_the_token_unregistered_with_its_time(
    fake: FakeApns, signing: SigningIdentity
) -> None:
    fake.answer(TOKEN, 410, "Unregistered")
    client = _client(fake, signing, "pass.dev.tessera")
    try:
        result = await client.push(TOKEN)
    finally:
        await client.aclose()
    assert result.unregistered
    assert not result.delivered
    assert result.reason == "Unregistered"
    assert result.inactive_since is not None


async def test_another_topic_than_the_certificate_is_refused(
    fake: FakeApns, signing: SigningIdentity
) -> None:
    client = _client(fake, signing, "pass.com.example.other")
    try:
        result = await client.push(TOKEN)
    finally:
        await client.aclose()
    assert (result.status, result.reason) == (400, "TopicDisallowed")


async def test_without_a_client_certificate_the_fake_refuses_the_connection(
    fake: FakeApns, tmp_path: Path
) -> None:
    stranger = ensure_dev_identity(tmp_path / "other-root")
    for identity in (None, stranger):
        client = _client(fake, identity, "pass.dev.tessera")
        try:
            result = await client.push(TOKEN)
        finally:
            await client.aclose()
        assert result.status is None, result
        assert result.reason
    assert fake.pushes() == []


@pytest.mark.parametrize(
    ("status", "outcome"),
    [(200, "success"), (410, "unregistered"), (400, "rejected"), (None, "error")],
)
def test_each_answer_has_its_metrics_outcome(status: int | None, outcome: str) -> None:
    assert PushResult(status).outcome == outcome


def test_provider_tokens_are_es256_jwts_reused_for_30_minutes() -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    token = ProviderToken(pem, "KEY1234567", "TEAM123456")
    first = token.current()
    assert token.current() == first
    assert jwt.get_unverified_header(first) == {"alg": "ES256", "kid": "KEY1234567", "typ": "JWT"}
    claims = jwt.decode(first, key.public_key(), algorithms=["ES256"])
    assert claims["iss"] == "TEAM123456"
    assert isinstance(claims["iat"], int)


def test_token_authentication_needs_its_three_settings(tmp_path: Path) -> None:
    key = tmp_path / "AuthKey.p8"
    key.write_bytes(
        ec.generate_private_key(ec.SECP256R1()).private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    with pytest.raises(ValueError, match="together"):
        EventsSettings(apns_key_path=key, apns_key_id="KEY1234567")
    settings = EventsSettings(apns_key_path=key, apns_key_id="KEY1234567", apns_team_id="T1")
    assert settings.apns_url == "https://api.push.apple.com"
    assert settings.apns_ca_path is None


async def test_a_token_client_sends_a_bearer_token_instead_of_a_certificate(
    tmp_path: Path, signing: SigningIdentity
) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    root = tmp_path / "signing" / "root-ca.pem"
    with running_fake_apns(root, tmp_path, client_certificate=False) as fake:
        client = ApnsClient(
            fake.url,
            "pass.dev.tessera",
            tls_context(None, fake.server_ca_path),
            ProviderToken(pem, "KEY1234567", "TEAM123456"),
            timeout_seconds=5,
        )
        try:
            result = await client.push(TOKEN)
        finally:
            await client.aclose()
    assert result.delivered
    (push,) = fake.pushes()
    assert push.client_uid is None
    scheme, _, token = push.headers["authorization"].partition(" ")
    assert scheme == "bearer"
    assert jwt.decode(token, key.public_key(), algorithms=["ES256"])["iss"] == "TEAM123456"


async def test_the_configured_client_presents_the_shared_identity(
    fake: FakeApns, tmp_path: Path
) -> None:
    """Without a token, the events service authenticates with the identity the issuer signs
    with: here the development one under the shared data dir."""
    settings = EventsSettings(
        data_dir=tmp_path, apns_url=fake.url, apns_ca_path=fake.server_ca_path
    )
    client = create_apns_client(settings)
    try:
        result = await client.push(TOKEN)
    finally:
        await client.aclose()
    assert result.delivered
    assert fake.pushes(TOKEN)[0].client_uid == settings.pass_type_identifier
