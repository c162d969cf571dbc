"""The webhooks service: subscription commands, the events consumer (fan-out into deliveries)
and the delivery scheduler."""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from services.webhooks import commands, handlers
from services.webhooks.config import WebhooksSettings
from services.webhooks.delivery import Deliverer
from services.webhooks.repository import WebhookRepository
from services.webhooks.resolver import resolver
from services.webhooks.scheduler import Scheduler
from services.webhooks.secretbox import SecretBox
from services.webhooks.sender import Sender
from services.webhooks.service import WebhookService
from shared.clock import Clock, SystemClock
from shared.connections import open_connections, running
from shared.health import health_router
from shared.messages import WEBHOOKS_CONSUMER
from shared.metrics import consumer_pending, instrument


def create_app(settings: WebhooksSettings | None = None, clock: Clock | None = None) -> FastAPI:
    settings = settings or WebhooksSettings()
    clock = clock or SystemClock()
    conn = open_connections(settings)
    repo = WebhookRepository(conn.db)
    box = SecretBox(settings.secret_key.get_secret_value())
    resolve = resolver(settings.resolver_hosts_file)
    service = WebhookService(
        repo,
        box,
        clock,
        allow_private=settings.allow_private_networks,
        max_per_account=settings.max_per_account,
        resolver=resolve,
    )
    commands.register(conn.broker, service)
    scheduler = Scheduler(
        repo,
        clock,
        lease_seconds=settings.lease_seconds,
        max_concurrent=settings.max_concurrent_deliveries,
        max_per_endpoint=settings.max_concurrent_per_endpoint,
        max_per_account=settings.max_concurrent_per_account,
        poll_seconds=settings.scheduler_poll_seconds,
    )
    fan_out = handlers.register(
        conn.broker, repo, clock, settings.retry_schedule_seconds, scheduler.offer
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await repo.ensure_indexes()
        sender = Sender(
            timeout_seconds=settings.timeout_seconds,
            allow_private=settings.allow_private_networks,
            max_connections=settings.max_concurrent_deliveries,
            resolver=resolve,
        )
        deliverer = Deliverer(repo, box, sender, clock, settings.retry_schedule_seconds)
        async with running(conn, fan_out):
            scheduler.start(deliverer.attempt)
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
        refresh=[consumer_pending(conn.broker, WEBHOOKS_CONSUMER)],
    )
    return app
