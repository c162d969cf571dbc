"""The webhooks service: consumes lifecycle events (signed delivery comes in a later issue)."""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from services.webhooks import handlers
from services.webhooks.config import WebhooksSettings
from shared.connections import open_connections, running
from shared.health import health_router


def create_app(settings: WebhooksSettings | None = None) -> FastAPI:
    settings = settings or WebhooksSettings()
    conn = open_connections(settings)
    handlers.register(conn.broker)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with running(conn):
            yield

    app = FastAPI(title="Tessera webhooks", lifespan=lifespan, openapi_url=None)
    app.include_router(health_router({"mongodb": conn.ping_mongo, "nats": conn.ping_nats}))
    return app
