"""The issuer's service objects on a real store, below NATS and HTTP: a repository on a
database of the test's own (dropped at the end), the development signing identities, and
IssuerService; for tests of commands, bulk creation and the job worker."""

import secrets
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

from services.issuer.artifacts import WalletArtifacts
from services.issuer.config import IssuerSettings
from services.issuer.google.passes import GoogleWallet
from services.issuer.identity import load_identities
from services.issuer.jobs.registry import JobRegistry
from services.issuer.jobs.store import Chunk, JobStore
from services.issuer.jobs.worker import JobWorker
from services.issuer.repository import IssuerRepository
from shared.clock import Clock, SystemClock
from shared.messages import CreateTemplate, UpdateTemplate
from shared.models import Mode
from shared.mongo import create_client
from shared.outbox import OutboxRelay
from tests.support.api import TEMPLATE_BODY

ACCOUNT = "acct_service"
# How long a job worker's claim holds a chunk in the tests that run chunks by hand.
JOB_LEASE = timedelta(seconds=60)
SITE = "http://tessera.test"


def command_base(mode: Mode = "test", account: str = ACCOUNT) -> dict[str, Any]:
    """The fields every command carries, under a fresh command id."""
    return {"command_id": str(uuid.uuid4()), "account_id": account, "mode": mode}


def dev_artifacts(data_dir: Path) -> WalletArtifacts:
    """What the issuer signs with when nothing is configured: the development identities."""
    identities = load_identities(IssuerSettings.model_validate({"data_dir": data_dir}))
    google = GoogleWallet(identities.google, None, origins=[SITE])
    return WalletArtifacts(identities, google, site_url=SITE, wallet_url=SITE)


@asynccontextmanager
async def issuer_repository(mongo_url: str) -> AsyncIterator[IssuerRepository]:
    """The issuer's repository on a database of its own, with its indexes."""
    client = create_client(mongo_url)
    db = client[f"t_{secrets.token_hex(6)}"]
    repository = IssuerRepository(client, db)
    await repository.ensure_indexes()
    try:
        yield repository
    finally:
        await client.drop_database(db.name)
        await client.close()


def template_command(mode: Mode = "test") -> CreateTemplate:
    return CreateTemplate(
        **command_base(mode),
        name=TEMPLATE_BODY["name"],
        template_type=TEMPLATE_BODY["type"],
        apple_style=TEMPLATE_BODY["apple_style"],
        design=TEMPLATE_BODY["design"],
    )


def archive_command(template_id: str) -> UpdateTemplate:
    return UpdateTemplate(**command_base(), template_id=template_id, archived=True)


def job_worker(
    repo: IssuerRepository,
    store: JobStore,
    registry: JobRegistry,
    *,
    clock: Clock | None = None,
    relay: OutboxRelay | None = None,
    max_prepared_age_seconds: float = 5.0,
) -> JobWorker:
    """A job worker whose poller is not started: tests claim chunks and run them by hand."""
    return JobWorker(
        repo,
        store,
        registry,
        clock or SystemClock(),
        lambda: None,
        concurrency=2,
        lease_seconds=JOB_LEASE.total_seconds(),
        poll_seconds=1.0,
        upload_timeout_seconds=3600,
        relay=relay,
        max_prepared_age_seconds=max_prepared_age_seconds,
    )


async def claim_chunks(
    store: JobStore, owner: str = "test/1", later: timedelta = timedelta()
) -> list[Chunk]:
    """What a worker's claim `later` than now takes (up to 100 chunks), leased to `owner`."""
    now = SystemClock().now() + later
    return await store.claim(now, now + JOB_LEASE, owner, 100)
