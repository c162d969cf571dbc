"""The events service: records lifecycle events, serves the wallets' callbacks (Apple's pass
web service at /v1, Google's signed callbacks), pushes live updates to Apple devices, and
relays the events it observes from its outbox."""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from services.events import handlers
from services.events.apns import create_apns_client
from services.events.config import EventsSettings
from services.events.events_out import events_outbox
from services.events.google_callbacks import google_callbacks_router
from services.events.push import LiveUpdates
from services.events.repository import EventsRepository
from services.events.wallet_endpoints import apple_wallet, apple_wallet_router
from services.issuer.reads import IssuerReads
from shared.connections import open_connections, running
from shared.health import health_router
from shared.messages import EVENTS_CONSUMER
from shared.metrics import consumer_pending, instrument
from shared.outbox import OutboxRelay


def create_app(settings: EventsSettings | None = None) -> FastAPI:
    settings = settings or EventsSettings()
    conn = open_connections(settings)
    repo = EventsRepository(conn.db)
    recorder = handlers.register(conn.broker, repo)
    outbox = events_outbox(conn.db)
    relay = OutboxRelay(outbox, conn.broker)
    wallet = apple_wallet(conn, settings, outbox)
    apns = create_apns_client(settings)
    live_updates = LiveUpdates(
        wallet.registrations, wallet.service, apns, conn.broker, IssuerReads(conn.db)
    )
    pushers = handlers.register_live_updates(
        conn.broker, live_updates, settings.live_update_workers
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await repo.ensure_indexes()
        try:
            async with running(conn, relay, recorder, *pushers):
                yield
        finally:
            await apns.aclose()

    app = FastAPI(title="Tessera events", lifespan=lifespan, openapi_url=None)
    app.include_router(health_router({"mongodb": conn.ping_mongo, "nats": conn.ping_nats}))
    instrument(
        app,
        "events",
        settings,
        refresh=[consumer_pending(conn.broker, EVENTS_CONSUMER), *outbox.gauges()],
    )
    app.include_router(google_callbacks_router(settings, conn, outbox))
    app.include_router(apple_wallet_router(wallet))
    return app
