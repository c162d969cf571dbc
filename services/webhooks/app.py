"""The webhooks service: subscription commands, and (delivery) the events consumer."""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from services.webhooks import commands, handlers
from services.webhooks.config import WebhooksSettings
from services.webhooks.repository import WebhookRepository
from services.webhooks.secretbox import SecretBox
from services.webhooks.service import WebhookService
from shared.clock import Clock, SystemClock
from shared.connections import open_connections, running
from shared.health import health_router


def create_app(settings: WebhooksSettings | None = None, clock: Clock | None = None) -> FastAPI:
    settings = settings or WebhooksSettings()
    clock = clock or SystemClock()
    conn = open_connections(settings)
    repo = WebhookRepository(conn.db)
    assert settings.secret_key is not None  # WebhooksSettings refuses to start without it
    box = SecretBox(settings.secret_key)
    service = WebhookService(repo, box, clock, allow_private=settings.allow_private_networks)
    commands.register(conn.broker, service)
    handlers.register(conn.broker)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await repo.ensure_indexes()
        async with running(conn):
            yield

    app = FastAPI(title="Tessera webhooks", lifespan=lifespan, openapi_url=None)
    app.include_router(health_router({"mongodb": conn.ping_mongo, "nats": conn.ping_nats}))
    return app
