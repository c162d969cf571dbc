"""The events service: records lifecycle events and serves the wallets' callbacks (Apple's
pass web service at /v1, Google's signed callbacks)."""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from services.events import handlers
from services.events.config import EventsSettings
from services.events.google_callbacks import google_callbacks_router
from services.events.repository import EventsRepository
from services.events.wallet_endpoints import apple_wallet, apple_wallet_router
from shared.connections import open_connections, running
from shared.health import health_router
from shared.messages import EVENTS_CONSUMER
from shared.metrics import consumer_pending, instrument


def create_app(settings: EventsSettings | None = None) -> FastAPI:
    settings = settings or EventsSettings()
    conn = open_connections(settings)
    repo = EventsRepository(conn.db)
    handlers.register(conn.broker, repo)
    wallet = apple_wallet(conn, settings)
    handlers.register_wallet_commands(conn.broker, wallet.service)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await repo.ensure_indexes()
        async with running(conn):
            yield

    app = FastAPI(title="Tessera events", lifespan=lifespan, openapi_url=None)
    app.include_router(health_router({"mongodb": conn.ping_mongo, "nats": conn.ping_nats}))
    instrument(
        app,
        "events",
        settings,
        refresh=[consumer_pending(conn.broker, EVENTS_CONSUMER)],
    )
    app.include_router(google_callbacks_router(settings, conn))
    app.include_router(apple_wallet_router(wallet))
    return app
