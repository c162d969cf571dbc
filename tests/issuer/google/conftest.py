"""Fixtures for the Google Wallet tests: one development identity and the fake Google."""

import dataclasses
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from services.issuer.artifacts import WalletArtifacts
from services.issuer.config import IssuerSettings
from services.issuer.google.client import WalletRestClient
from services.issuer.google.identity import GoogleIdentity, ensure_dev_google_identity
from services.issuer.google.passes import GoogleWallet
from services.issuer.google.sync import GoogleSyncer, GoogleSyncStore
from services.issuer.identity import load_identities
from services.issuer.repository import IssuerRepository
from shared.clock import SystemClock
from tests.issuer.google import walletschema
from tests.support.fake_google import FakeGoogle, running_fake_google
from tests.support.issuer import SITE


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


@pytest.fixture
async def synced_artifacts(
    tmp_path: Path, identity: GoogleIdentity, fake_google: FakeGoogle
) -> AsyncIterator[WalletArtifacts]:
    """The issuer's artifacts with a Wallet REST client of the fake Google."""
    identities = load_identities(IssuerSettings.model_validate({"data_dir": tmp_path}))
    async with WalletRestClient(
        identity, api_base_url=fake_google.api_base_url, token_uri=fake_google.token_uri
    ) as client:
        google = GoogleWallet(identity, client, origins=[SITE])
        live = dataclasses.replace(identities, google=identity)
        yield WalletArtifacts(live, google, site_url=SITE, wallet_url=SITE)


@pytest.fixture
async def syncer(
    repo: IssuerRepository, synced_artifacts: WalletArtifacts
) -> AsyncIterator[GoogleSyncer]:
    """The Google step, running: what commands mark is upserted to the fake Google."""
    worker = await google_syncer(repo, synced_artifacts, concurrency=4)
    worker.start()
    yield worker
    await worker.stop()


async def google_syncer(
    repo: IssuerRepository,
    artifacts: WalletArtifacts,
    *,
    concurrency: int = 1,
    lease_seconds: float = 30.0,
) -> GoogleSyncer:
    """A Google step on the test's store (its indexes made), not started, retrying quickly."""
    store = GoogleSyncStore(repo.db)
    await store.ensure_indexes()
    return GoogleSyncer(
        store,
        repo,
        artifacts,
        SystemClock(),
        concurrency=concurrency,
        lease_seconds=lease_seconds,
        poll_seconds=0.1,
        retry_max_seconds=0.2,
    )
