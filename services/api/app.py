"""The api service: the v1 REST API, the operator API and the public pass files."""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from functools import partial

from fastapi import FastAPI

from services.api import errors, openapi
from services.api.config import ApiSettings
from services.api.deps import ApiContext, authenticate_uploader
from services.api.endpoints import (
    admin,
    admin_off,
    bundle_pages,
    device_logs,
    docs,
    download_links,
    events,
    files,
    images,
    jobs,
    links,
    page_fallbacks,
    pages,
    pass_bundles,
    passes,
    passes_batch,
    passes_variant_a,
    scanner_keys,
    scans,
    templates,
    webhooks,
)
from services.api.head import HeadAsGet
from services.api.idempotency import IdempotencyPolicy
from services.api.leases import QuotaLeases, RateLeases
from services.api.middleware import RequestContextMiddleware
from services.api.principals import PrincipalCache
from services.api.repository import ApiRepository
from services.events.reads import DeviceLogReads, EventReads
from services.issuer.reads import IssuerReads
from services.webhooks.reads import WebhookReads
from shared.clock import Clock, SystemClock
from shared.connections import open_connections, running
from shared.health import health_router
from shared.metrics import instrument
from shared.outbox import OutboxRelay

DESCRIPTION = """Issue Apple Wallet and Google Wallet passes from templates.

Authenticate with `Authorization: Bearer <API_KEY>` (`svc_test_...` or `svc_live_...`).
Every error answers `{"error": {"type", "code", "message", "param"}}`.
POST and PATCH accept an `Idempotency-Key` header.
"""


def create_app(settings: ApiSettings | None = None, clock: Clock | None = None) -> FastAPI:
    settings = settings or ApiSettings()
    clock = clock or SystemClock()
    conn = open_connections(settings)
    repo = ApiRepository(conn.db)
    relay = OutboxRelay(repo.outbox, conn.broker)
    principals = PrincipalCache(conn.broker, settings.replica)
    context = ApiContext(
        settings=settings,
        repo=repo,
        issuer=IssuerReads(conn.db),
        events=EventReads(conn.db),
        device_logs=DeviceLogReads(conn.db),
        webhooks=WebhookReads(conn.db),
        broker=conn.broker,
        clock=clock,
        idempotency=IdempotencyPolicy(
            repo=repo,
            clock=clock,
            ttl=settings.idempotency_ttl,
            # Longer than a command may take, so a running request is never taken over.
            lock=timedelta(seconds=settings.request_timeout_seconds * 2 + 5),
        ),
        principals=principals,
        rate_leases=RateLeases(repo),
        quota_leases=QuotaLeases(repo),
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await repo.ensure_indexes()
        async with running(conn, relay, principals):
            try:
                yield
            finally:
                # Quota units this replica leased and did not use go back to the counters.
                await context.quota_leases.give_back()

    app = FastAPI(
        title="Tessera",
        version="1.0.0",
        description=DESCRIPTION,
        lifespan=lifespan,
        # FastAPI's pages load from a CDN; endpoints/docs.py serves ours (docs/api-docs.md).
        docs_url=None,
        redoc_url=None,
    )
    app.state.context = context
    errors.install(app)
    openapi.install(app)
    app.add_middleware(HeadAsGet)  # inside the context: logged and limited as HEAD
    app.add_middleware(
        RequestContextMiddleware,
        max_body_bytes=settings.max_body_bytes,
        # The import routes take far larger bodies (and CSV): endpoints/jobs.py.
        body_rules=jobs.BODY_RULES,
        uploader=partial(authenticate_uploader, context),
    )
    instrument(app, "api", settings, refresh=repo.outbox.gauges())
    app.include_router(health_router({"mongodb": conn.ping_mongo, "nats": conn.ping_nats}))
    routers = (
        templates,
        passes,
        passes_batch,
        jobs,
        download_links,
        events,
        files,
        pages,
        links,
        images,
        passes_variant_a,
        webhooks,
        scans,
        scanner_keys,
        pass_bundles,
        bundle_pages,
        docs,
    )
    for module in routers:
        app.include_router(module.router)
    if settings.admin_token is not None:
        # Without a token the operator API does not exist at all: 404, not in /openapi.json.
        app.include_router(admin.router)
        app.include_router(device_logs.router)
    else:
        app.include_router(admin_off.router)
    app.include_router(page_fallbacks.router)  # last: only what no other route serves
    return app
