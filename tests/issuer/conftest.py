"""The issuer's service objects on a real store (tests/support/issuer.py), for the test modules
that take them as they are; a module that needs them otherwise defines its own fixture."""

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from services.issuer.artifacts import WalletArtifacts
from services.issuer.repository import IssuerRepository
from services.issuer.service import IssuerService
from shared.apple_identity import SigningIdentity, ensure_dev_identity
from shared.clock import SystemClock
from tests.support.issuer import dev_artifacts, issuer_repository


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> WalletArtifacts:
    data_dir: Path = tmp_path_factory.mktemp("issuer-data")
    return dev_artifacts(data_dir)


@pytest.fixture
async def repo(mongo_url: str) -> AsyncIterator[IssuerRepository]:
    async with issuer_repository(mongo_url) as repository:
        yield repository


@pytest.fixture
def service(repo: IssuerRepository, artifacts: WalletArtifacts) -> IssuerService:
    return IssuerService(repo, artifacts, SystemClock(), lambda: None)


@pytest.fixture(scope="module")
def signing_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A development signing identity of the module's own (root CA included, for openssl)."""
    directory = tmp_path_factory.mktemp("signing")
    ensure_dev_identity(directory)
    return directory


@pytest.fixture(scope="module")
def identity(signing_dir: Path) -> SigningIdentity:
    return ensure_dev_identity(signing_dir)
