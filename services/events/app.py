"""The events service: records lifecycle events; later also receives wallet callbacks."""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from services.events import handlers
from services.events.config import EventsSettings
from services.events.repository import EventsRepository
from shared.connections import open_connections, running
from shared.health import health_router


def create_app(settings: EventsSettings | None = None) -> FastAPI:
    settings = settings or EventsSettings()
    conn = open_connections(settings)
    repo = EventsRepository(conn.db)
    handlers.register(conn.broker, repo)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await repo.ensure_indexes()
        async with running(conn):
            yield

    app = FastAPI(title="Tessera events", lifespan=lifespan, openapi_url=None)
    app.include_router(health_router({"mongodb": conn.ping_mongo, "nats": conn.ping_nats}))
    return app
