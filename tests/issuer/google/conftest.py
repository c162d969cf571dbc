"""Fixtures for the Google Wallet tests: one development identity and the fake Google."""

from collections.abc import Iterator

import pytest

from services.issuer.google.identity import GoogleIdentity, ensure_dev_google_identity
from tests.issuer.google import walletschema
from tests.support.fake_google import FakeGoogle, running_fake_google


@pytest.fixture(scope="session")
def identity(tmp_path_factory: pytest.TempPathFactory) -> GoogleIdentity:
    # One RSA key for the session: generating one per test would only slow the suite down.
    return ensure_dev_google_identity(tmp_path_factory.mktemp("google-identity"))


@pytest.fixture
def fake_google(identity: GoogleIdentity) -> Iterator[FakeGoogle]:
    """A fake Google that knows `identity` and validates resources like the real API."""
    with running_fake_google(validate=walletschema.errors) as fake:
        fake.register(identity.client_email, identity.public_key_pem())
        yield fake
