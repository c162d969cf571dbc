"""POST /google/callbacks: Google Wallet's signed save/delete callbacks (docs/wallet-callbacks.md).

Every class Tessera creates names this URL in its `callbackOptions.url`. A verified `save`
records `installed`, a `del` records `removed`; a verified callback of another eventType, or
one delivered again, is acknowledged with 200 and records nothing. Any refusal is the error
envelope with a 4xx (or a 503 when the failure is ours, which Google retries) and records
nothing.
"""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Final

from fastapi import APIRouter, FastAPI, Request, Response
from fastapi.responses import JSONResponse

from services.events.bodies import bounded_body
from services.events.config import EventsSettings
from services.events.google_events import GoogleCallbacks, handle_callback, root_keys_from
from services.events.repository import GoogleNonces
from services.issuer.reads import IssuerReads
from shared.clock import SystemClock
from shared.connections import Connections
from shared.errors import ApiError, PayloadTooLarge
from shared.outbox import Outbox

PATH: Final = "/google/callbacks"
# A callback is well under 2 KiB; anything far larger is not one.
MAX_BODY_BYTES: Final = 64 * 1024


def google_callbacks_router(
    settings: EventsSettings, conn: Connections, outbox: Outbox
) -> APIRouter:
    callbacks = GoogleCallbacks(
        nonces=GoogleNonces(conn.db, outbox),
        passes=IssuerReads(conn.db),
        clock=SystemClock(),
        issuer_id=settings.google_issuer_id,
        root_keys=root_keys_from(settings),
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await callbacks.nonces.ensure_indexes()
        try:
            yield
        finally:
            await callbacks.root_keys.aclose()

    router = APIRouter(lifespan=lifespan)

    @router.post(PATH, include_in_schema=False)
    async def google_callback(request: Request) -> Response:
        try:
            body = await bounded_body(request, MAX_BODY_BYTES)
            if body is None:
                raise PayloadTooLarge(
                    "A Google Wallet callback is never this large.", code="body_too_large"
                )
            await handle_callback(callbacks, body)
        except ApiError as exc:
            return JSONResponse(exc.envelope(), status_code=exc.status)
        return JSONResponse({"received": True})

    return router
