"""Apple Wallet's pass web service, served at wallet_url (the webServiceURL of every pass).

The five endpoints of Apple's "Wallet Passes web service" reference. Thin: count the request
against the rate limits (rate_limits.py), read the path, the headers and a bounded body
(bodies.py), call registrations.py or device_logs.py, and answer as Apple's devices expect:
bare statuses, JSON for the serial listing, the .pkpass with Last-Modified (never later than
its Date).
"""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Annotated

from fastapi import APIRouter, FastAPI, Query, Request
from fastapi.responses import JSONResponse, Response
from starlette.background import BackgroundTask

from services.events import device_logs
from services.events.bodies import bounded_body
from services.events.config import EventsSettings
from services.events.rate_limits import WalletLimits, WalletRateLimiter
from services.events.registrations import AppleWebService
from services.events.repository import DeviceLogs, Registrations, WalletRateWindows
from services.issuer.reads import IssuerReads
from shared.clock import Clock, SystemClock
from shared.connections import Connections
from shared.http_date import dated
from shared.outbox import Outbox

PKPASS_TYPE = "application/vnd.apple.pkpass"
UpdatedSince = Annotated[str | None, Query(alias="passesUpdatedSince")]
MAX_REGISTRATION_BYTES = 4096


@dataclass(frozen=True)
class AppleWallet:
    registrations: Registrations
    logs: DeviceLogs
    windows: WalletRateWindows
    limiter: WalletRateLimiter
    service: AppleWebService
    clock: Clock


def apple_wallet(
    conn: Connections, settings: EventsSettings, outbox: Outbox, clock: Clock | None = None
) -> AppleWallet:
    clock = clock or SystemClock()
    registrations = Registrations(conn.db, outbox)
    service = AppleWebService(
        registrations,
        IssuerReads(conn.db),
        outbox,
        clock,
        max_devices=settings.max_devices_per_pass,
    )
    windows = WalletRateWindows(conn.db)
    limits = WalletLimits(
        window_seconds=settings.wallet_rate_window_seconds,
        per_pass=settings.wallet_rate_limit_per_pass,
        per_address=settings.wallet_rate_limit_per_address,
    )
    limiter = WalletRateLimiter(windows, limits, clock)
    return AppleWallet(registrations, DeviceLogs(conn.db), windows, limiter, service, clock)


def apple_wallet_router(wallet: AppleWallet) -> APIRouter:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await wallet.registrations.ensure_indexes()
        await wallet.logs.ensure_indexes()
        await wallet.windows.ensure_indexes()
        yield

    router = APIRouter(prefix="/v1", include_in_schema=False, lifespan=lifespan)
    registration = "/devices/{device}/registrations/{pass_type}/{serial}"

    async def over_limit(request: Request, pass_key: tuple[str, str] | None) -> Response | None:
        # uvicorn sets request.client from X-Forwarded-For only for the proxies it trusts.
        address = request.client.host if request.client else None
        retry_after = await wallet.limiter.retry_after(address, pass_key)
        if not retry_after:
            return None
        return Response(status_code=429, headers={"Retry-After": str(retry_after)})

    @router.post(registration)
    async def register(device: str, pass_type: str, serial: str, request: Request) -> Response:
        if (refusal := await over_limit(request, (pass_type, serial))) is not None:
            return refusal
        body = await bounded_body(request, MAX_REGISTRATION_BYTES)
        if body is None:
            return Response(status_code=413)
        authorization = request.headers.get("authorization")
        status = await wallet.service.register(device, pass_type, serial, authorization, body)
        return Response(status_code=status)

    @router.delete(registration)
    async def unregister(device: str, pass_type: str, serial: str, request: Request) -> Response:
        if (refusal := await over_limit(request, (pass_type, serial))) is not None:
            return refusal
        authorization = request.headers.get("authorization")
        status = await wallet.service.unregister(device, pass_type, serial, authorization)
        return Response(status_code=status)

    @router.get("/devices/{device}/registrations/{pass_type}")
    async def updated_serials(
        device: str, pass_type: str, request: Request, since: UpdatedSince = None
    ) -> Response:
        if (refusal := await over_limit(request, None)) is not None:
            return refusal
        found = await wallet.service.updated_serials(device, pass_type, since)
        if found is None:
            return Response(status_code=204)
        return JSONResponse(
            {"serialNumbers": found.serial_numbers, "lastUpdated": found.last_updated}
        )

    @router.get("/passes/{pass_type}/{serial}")
    async def latest_pass(pass_type: str, serial: str, request: Request) -> Response:
        if (refusal := await over_limit(request, (pass_type, serial))) is not None:
            return refusal
        answer = await wallet.service.latest_pass(
            pass_type,
            serial,
            request.headers.get("authorization"),
            request.headers.get("if-modified-since"),
        )
        if answer.last_modified is None:
            return Response(status_code=answer.status)
        headers = dated(answer.last_modified, wallet.clock.now()) | {"Cache-Control": "no-cache"}
        if answer.status != 200:
            return Response(status_code=answer.status, headers=headers)
        delivered = answer.delivered
        return Response(
            answer.data,
            media_type=PKPASS_TYPE,
            headers=headers,
            background=None
            if delivered is None
            else BackgroundTask(wallet.service.record_delivery, delivered, answer.version),
        )

    @router.post("/log")
    async def log(request: Request) -> Response:
        if (refusal := await over_limit(request, None)) is not None:
            return refusal
        body = await bounded_body(request, device_logs.MAX_BODY_BYTES)
        if body is None:
            return Response(status_code=413)
        address = request.client.host if request.client else None
        status = await device_logs.store_logs(wallet.logs, wallet.clock, body, address)
        return Response(status_code=status)

    return router
