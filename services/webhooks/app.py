"""The webhooks service: subscription commands, the events consumer (fan-out into deliveries)
and the delivery scheduler."""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta

from fastapi import FastAPI

from services.webhooks import commands, handlers
from services.webhooks.config import WebhooksSettings
from services.webhooks.delivery import Deliverer
from services.webhooks.endpoint_health import EndpointHealth
from services.webhooks.operations import DeliveryOperations
from services.webhooks.outcomes import OutcomeWriter
from services.webhooks.quiet_scopes import QuietScopes
from services.webhooks.repository import WebhookRepository
from services.webhooks.resolver import resolver
from services.webhooks.rotation import secret_sweeper
from services.webhooks.scheduler import Scheduler
from services.webhooks.secretbox import SecretBox
from services.webhooks.sender import Sender
from services.webhooks.service import WebhookService
from services.webhooks.throttle import Throttle
from shared.clock import Clock, SystemClock
from shared.connections import open_connections, running
from shared.health import health_router
from shared.messages import WEBHOOKS_CONSUMER
from shared.metrics import (
    WEBHOOKS_AUTO_DISABLED,
    WEBHOOKS_FAILING,
    consumer_pending,
    count_gauge,
    instrument,
)
from shared.sweeper import RETENTION_SWEEP_SECONDS, retention_sweep


def create_app(settings: WebhooksSettings | None = None, clock: Clock | None = None) -> FastAPI:
    settings = settings or WebhooksSettings()
    clock = clock or SystemClock()
    conn = open_connections(settings)
    repo = WebhookRepository(conn.db)
    box = SecretBox(settings.secret_key.get_secret_value())
    resolve = resolver(settings.resolver_hosts_file)
    scheduler = Scheduler(
        repo,
        clock,
        lease_seconds=settings.lease_seconds,
        timeout_seconds=settings.timeout_seconds,
        max_concurrent=settings.max_concurrent_deliveries,
        max_per_endpoint=settings.max_concurrent_per_endpoint,
        max_per_account=settings.max_concurrent_per_account,
        poll_seconds=settings.scheduler_poll_seconds,
    )
    quiet = QuietScopes(conn.broker, settings.replica)
    # Resend and recover ask for attempts in the store, then wake this replica's scheduler.
    operations = DeliveryOperations(conn.db, clock, wake=scheduler.kick)
    service = WebhookService(
        repo,
        box,
        clock,
        allow_private=settings.allow_private_networks,
        max_per_account=settings.max_per_account,
        resolver=resolve,
        operations=operations,
        quiet=quiet,
    )
    commands.register(conn.broker, service)
    delays = settings.retry_schedule_seconds
    fan_out = handlers.register(conn.broker, repo, clock, delays, scheduler, quiet)
    health = EndpointHealth(repo, timedelta(seconds=settings.disable_after))

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await repo.ensure_indexes()
        await repo.backfill_pass_ids_once()
        await operations.ensure_indexes()
        sender = Sender(
            timeout_seconds=settings.timeout_seconds,
            allow_private=settings.allow_private_networks,
            max_connections=settings.max_concurrent_deliveries,
            resolver=resolve,
        )
        outcomes = OutcomeWriter(repo, health, clock.now)
        deliverer = Deliverer(
            repo,
            box,
            sender,
            clock,
            settings.retry_schedule_seconds,
            outcomes,
            Throttle(repo),
        )
        # Delivered and dead deliveries, 90 days after their event (docs/webhooks.md#retention).
        retention = retention_sweep(
            "webhook-delivery-retention",
            repo.purge_finished,
            clock,
            settings.delivery_retention_days,
            RETENTION_SWEEP_SECONDS,
            "deleted %d deliveries past retention",
        )
        async with running(conn, quiet, *fan_out, secret_sweeper(conn.db, clock), retention):
            scheduler.start(deliverer.attempt, first=deliverer)
            try:
                yield
            finally:
                await scheduler.stop(grace_seconds=settings.timeout_seconds)
                await sender.aclose()

    app = FastAPI(title="Tessera webhooks", lifespan=lifespan, openapi_url=None)
    app.include_router(health_router({"mongodb": conn.ping_mongo, "nats": conn.ping_nats}))
    instrument(
        app,
        "webhooks",
        settings,
        refresh=[
            consumer_pending(conn.broker, WEBHOOKS_CONSUMER),
            count_gauge(WEBHOOKS_FAILING, repo.count_failing, "failing webhooks"),
            count_gauge(WEBHOOKS_AUTO_DISABLED, repo.count_auto_disabled, "disabled webhooks"),
        ],
    )
    return app
