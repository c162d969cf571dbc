"""The issuer service: NATS command handlers, its outbox relay, and a health endpoint."""

import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from services.issuer import handlers
from services.issuer.artifacts import WalletArtifacts
from services.issuer.bulk import PassMaker
from services.issuer.config import IssuerSettings
from services.issuer.google.client import WalletRestClient
from services.issuer.google.passes import GoogleWallet
from services.issuer.google.sync import GoogleSyncer, GoogleSyncStore
from services.issuer.google_links import GoogleLinks
from services.issuer.identity import load_identities
from services.issuer.jobs.import_passes import JOB_TYPE as IMPORT_PASSES
from services.issuer.jobs.import_passes import ImportPasses
from services.issuer.jobs.registry import JobRegistry
from services.issuer.jobs.rerender import PassRerenderer
from services.issuer.jobs.rollout import JOB_TYPE as TEMPLATE_ROLLOUT
from services.issuer.jobs.rollout import TemplateRollout
from services.issuer.jobs.store import JobStore
from services.issuer.jobs.update_passes import JOB_TYPE as UPDATE_PASSES
from services.issuer.jobs.update_passes import UpdatePasses
from services.issuer.jobs.worker import JobWorker
from services.issuer.repository import IssuerRepository
from services.issuer.scan_store import ScanStore
from services.issuer.service import IssuerService
from services.issuer.signing_expiry import SigningExpiryWatch
from services.issuer.template_cache import TemplateCache
from shared.clock import Clock, SystemClock
from shared.connections import Worker, open_connections, running
from shared.health import health_router
from shared.metrics import instrument
from shared.nats import max_payload
from shared.outbox import OutboxRelay
from shared.sweeper import RETENTION_SWEEP_SECONDS, retention_sweep

log = logging.getLogger(__name__)


def create_app(settings: IssuerSettings | None = None, clock: Clock | None = None) -> FastAPI:
    settings = settings or IssuerSettings()
    # First: an unusable signing identity stops the start before anything is opened.
    identities = load_identities(settings)
    conn = open_connections(settings)
    repo = IssuerRepository(conn.mongo, conn.db)
    clock = clock or SystemClock()
    signing_watch = SigningExpiryWatch(identities.apple, clock)
    relay = OutboxRelay(
        repo.outbox, conn.broker, poll_seconds=settings.outbox_poll_seconds, clock=clock
    )
    google_client = (
        None
        if identities.google.is_development
        else WalletRestClient(
            identities.google,
            api_base_url=settings.google_api_base_url,
            token_uri=settings.google_token_uri,
        )
    )
    google = GoogleWallet(
        identities.google,
        google_client,
        origins=[settings.site_url],
        placeholder_logo_url=f"{settings.site_url}/assets/logo.png",
        callback_url=f"{settings.wallet_url}/google/callbacks",
    )
    artifacts = WalletArtifacts(
        identities, google, site_url=settings.site_url, wallet_url=settings.wallet_url
    )
    job_store = JobStore(conn.db)
    google_store = GoogleSyncStore(conn.db)
    # The Google step runs only with Google credentials (without, the save link is the pass).
    google_syncer = (
        None
        if google_client is None
        else GoogleSyncer(
            google_store,
            repo,
            artifacts,
            clock,
            concurrency=settings.google_sync_workers,
            lease_seconds=settings.google_sync_lease_seconds,
            poll_seconds=settings.google_sync_poll_seconds,
            retry_max_seconds=settings.google_retry_max_seconds,
        )
    )

    def google_step() -> None:
        """A command or a job's chunk committed (it publishes its own events): its Google
        step, now."""
        if google_syncer is not None:
            google_syncer.wake()

    # Job types and their handlers: what a job's chunks are done with (jobs/registry.py).
    registry = JobRegistry()
    templates = TemplateCache(conn.broker, settings.replica)
    registry.register(IMPORT_PASSES, ImportPasses(PassMaker(repo, artifacts, clock, templates)))
    rerenderer = PassRerenderer(repo, artifacts, clock)
    registry.register(TEMPLATE_ROLLOUT, TemplateRollout(rerenderer, repo, job_store, clock))
    registry.register(UPDATE_PASSES, UpdatePasses(rerenderer))
    worker = JobWorker(
        repo,
        job_store,
        registry,
        clock,
        google_step,
        concurrency=settings.job_workers,
        lease_seconds=settings.job_lease_seconds,
        poll_seconds=settings.job_poll_seconds,
        upload_timeout_seconds=settings.job_upload_timeout_seconds,
        relay=relay,
        max_prepared_age_seconds=settings.max_prepared_age_seconds,
    )
    service = IssuerService(
        repo,
        artifacts,
        clock,
        google_step,
        # Give up before the api stops waiting, so the caller hears why.
        conflict_budget_seconds=settings.request_timeout_seconds * 0.8,
        message_limit=lambda: max_payload(conn.broker),
        job_store=job_store,
        on_job_started=worker.notify,
        google_classes=google_store if google_syncer is not None else None,
        relay=relay,
        max_prepared_age_seconds=settings.max_prepared_age_seconds,
        rollout_sweep_seconds=settings.rollout_sweep_seconds,
        templates=templates,
    )
    links = GoogleLinks(repo, artifacts)
    handlers.register(conn.broker, service, links, settings.command_workers)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        began = time.monotonic()
        await repo.ensure_indexes()
        # Passes stored before holder_email_key existed (docs/api-decisions.md#lists-and-cursors).
        await repo.backfill_email_keys_once()
        await repo.backfill_redemption_limits_once()
        await repo.unset_null_sync_due_once()
        await job_store.ensure_indexes()
        await ScanStore(conn.db).ensure_indexes()
        await google_store.ensure_indexes()
        # A start that hangs says where: the store's part is done, NATS's comes next.
        log.info("indexes and migrations done in %.1f s", time.monotonic() - began)
        # Finished jobs and their chunks, 90 days after (docs/api-decisions.md#jobs).
        retention = retention_sweep(
            "job-retention",
            job_store.purge_finished,
            clock,
            settings.job_retention_days,
            RETENTION_SWEEP_SECONDS,
            "deleted %d jobs past retention",
        )
        workers: list[Worker] = [relay, worker, signing_watch, templates, retention]
        if google_syncer is not None:
            workers.append(google_syncer)
        try:
            async with running(conn, *workers):
                yield
        finally:
            # After the workers stopped: the Google step gets its grace with a client to use
            # (closed first, every call in that grace failed and its passes waited a lease).
            if google_client is not None:
                await google_client.aclose()

    app = FastAPI(title="Tessera issuer", lifespan=lifespan, openapi_url=None)
    checks = {"mongodb": conn.ping_mongo, "nats": conn.ping_nats, "signing": signing_watch.check}
    app.include_router(health_router(checks, {"signing": signing_watch.detail}))
    instrument(app, "issuer", settings, refresh=repo.outbox.gauges())
    return app
