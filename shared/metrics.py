"""Prometheus metrics: the definitions every service shares, request metrics, and GET /metrics.

Each process keeps its own registry (prometheus_client's default one, no multiprocess mode);
Prometheus scrapes every replica, and queries sum over them. Label values are always from a
small fixed set: a route label is the route's template (`/v1/passes/{pass_id}`), never the
requested path, which may carry ids or download-link tokens.
"""

import hmac
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Annotated

from fastapi import APIRouter, FastAPI, Header, Response
from faststream.nats import NatsBroker
from prometheus_client import CONTENT_TYPE_LATEST, Counter, Gauge, Histogram, generate_latest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from shared.messages import EVENTS_STREAM
from shared.mongo import Origin, count_commands, origin
from shared.settings import ServiceSettings

log = logging.getLogger(__name__)

UNMATCHED = "unmatched"
# Any other method is counted as "OTHER": a client must not be able to mint label values.
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})

HTTP_REQUESTS = Counter(
    "tessera_http_requests",
    "HTTP requests answered, by route template and status.",
    ["service", "method", "route", "status"],
)
HTTP_DURATION = Histogram(
    "tessera_http_request_duration_seconds",
    "Time from a request's arrival to the end of its response.",
    ["service", "method", "route", "status"],
)
PASSES_ISSUED = Counter(
    "tessera_passes_issued", "Passes created (committed; replays not counted).", ["mode"]
)
PKPASS_BUILD = Histogram(
    "tessera_pkpass_build_seconds",
    "Time to render, sign and zip one .pkpass.",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
)
WEBHOOK_DELIVERIES = Counter(
    "tessera_webhook_deliveries",
    "Webhook delivery attempts, by the status they left the delivery in "
    "(delivered, failed: a retry is scheduled, dead: no retries left).",
    ["status"],
)
GOOGLE_SYNCS = Counter(
    "tessera_google_syncs",
    "Google step attempts of the issuer (a pass's object, or a class after a design change), "
    "by outcome (synced; failed: Google refused or did not answer, retried with backoff).",
    ["outcome"],
)
APNS_PUSHES = Counter(
    "tessera_apns_pushes",
    "Live-update pushes the events service sent APNs, by result (success, unregistered: 410 or "
    "an invalid token, rejected: other status, error: no answer).",
    ["result"],
)
CONSUMER_PENDING = Gauge(
    "tessera_jetstream_consumer_pending",
    "Messages of the events stream not yet processed by a durable consumer "
    "(num_pending + num_ack_pending), read at scrape time.",
    ["consumer"],
)

# The outboxes (shared/outbox.py), one per service that publishes events: `owner` is the service.
OUTBOX_PENDING = Gauge(
    "tessera_outbox_pending",
    "Outbox documents a service committed and has not yet published to JetStream (the "
    "issuer's live updates included; one document holds the events of a bulk transaction), "
    "read at scrape time.",
    ["owner"],
)
OUTBOX_SET_ASIDE = Counter(
    "tessera_outbox_set_aside",
    "Events an outbox relay set aside in its dead letters because they could not be published "
    "(too large for NATS, malformed, or failing while the others were published).",
    ["owner"],
)
MONGODB_COMMANDS = Counter(
    "tessera_mongodb_commands",
    "MongoDB commands sent (PyMongo command monitoring, shared/mongo.py), by command name and "
    "origin: http (an HTTP request), command (a NATS command), consumer (a JetStream consumer), "
    "background (relays, pollers, scrapes).",
    ["service", "command", "origin"],
)
OUTBOX_DEAD_LETTERS = Gauge(
    "tessera_outbox_dead_letters",
    "Events in an outbox's dead letters, waiting for an operator; read at scrape time.",
    ["owner"],
)

WEBHOOKS_FAILING = Gauge(
    "tessera_webhooks_failing",
    "Enabled webhooks whose every attempt has failed since some time (failing_since set), "
    "read at scrape time; -1 when the store does not answer.",
)
WEBHOOKS_AUTO_DISABLED = Gauge(
    "tessera_webhooks_auto_disabled",
    "Webhooks Tessera disabled because every attempt failed for TESSERA_WEBHOOKS_DISABLE_AFTER "
    "(disabled_reason failing), read at scrape time; -1 when the store does not answer.",
)

Refresh = Callable[[], Awaitable[None]]


def instrument(
    app: FastAPI, service: str, settings: ServiceSettings, refresh: Sequence[Refresh] = ()
) -> None:
    """Request metrics on every request of `app` and GET /metrics, behind TESSERA_METRICS_TOKEN
    when it is set. In production /metrics is served only with a token: the api and events
    ports are public, and metrics tell an outsider about every tenant's traffic.
    Call it after adding the app's other middleware, so this one is outermost.
    It also counts the process's MongoDB commands under `service`."""
    app.add_middleware(HttpMetricsMiddleware, service=service)
    count_commands(_command_counter(service))
    token = settings.metrics_token
    if token is None and settings.environment == "production":
        log.warning("GET /metrics is off: set TESSERA_METRICS_TOKEN to serve it in production")
        return
    secret = None if token is None else token.get_secret_value()
    app.include_router(metrics_router(secret, refresh))


def _command_counter(service: str) -> Callable[[str, Origin], None]:
    def count(command: str, origin: Origin) -> None:
        MONGODB_COMMANDS.labels(service, command, origin).inc()

    return count


def metrics_router(token: str | None = None, refresh: Sequence[Refresh] = ()) -> APIRouter:
    """GET /metrics in the Prometheus text format; `refresh` updates gauges read at scrape.
    With `token`, only `Authorization: Bearer <token>` is answered (compared in constant time);
    anything else gets 401 and no metrics."""
    router = APIRouter(include_in_schema=False)

    @router.get("/metrics")
    async def metrics(authorization: Annotated[str | None, Header()] = None) -> Response:
        if token is not None and not _bearer_matches(authorization, token):
            return Response(
                "metrics need the bearer token (TESSERA_METRICS_TOKEN)\n",
                status_code=401,
                media_type="text/plain",
                headers={"WWW-Authenticate": 'Bearer realm="metrics"'},
            )
        # What the gauges read is the scrape's own work, not the request's.
        with origin("background"):
            for update in refresh:
                await update()
        return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)

    return router


def _bearer_matches(authorization: str | None, token: str) -> bool:
    scheme, _, value = (authorization or "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(value.encode(), token.encode())


def consumer_pending(broker: NatsBroker, consumer: str) -> Refresh:
    """A refresh that sets the pending gauge of one durable consumer of the events stream."""

    async def update() -> None:
        try:
            info = await broker.connection.jetstream().consumer_info(EVENTS_STREAM, consumer)
        except Exception as exc:  # a scrape must answer even when NATS does not
            log.warning("consumer info of %s unavailable: %s", consumer, type(exc).__name__)
            # No sample rather than a stale one: alert on absence.
            CONSUMER_PENDING.remove(consumer)
            return
        CONSUMER_PENDING.labels(consumer).set(info.num_pending + info.num_ack_pending)

    return update


def outbox_pending(owner: str, read: Callable[[], Awaitable[int]]) -> Refresh:
    """A refresh that sets the outbox gauge of `owner` from `read` (its count); when the store
    does not answer the gauge reads -1, which no real count is, so an alert can tell."""
    return count_gauge(OUTBOX_PENDING.labels(owner), read, f"{owner} outbox size")


def outbox_dead_letters(owner: str, read: Callable[[], Awaitable[int]]) -> Refresh:
    """A refresh that sets the dead-letter gauge of `owner` from `read`; -1 when the store does
    not answer."""
    return count_gauge(OUTBOX_DEAD_LETTERS.labels(owner), read, f"{owner} outbox dead letters")


def count_gauge(gauge: Gauge, read: Callable[[], Awaitable[int]], what: str) -> Refresh:
    """A refresh that sets `gauge` from `read` (a count); -1 when the store does not answer."""

    async def update() -> None:
        try:
            gauge.set(await read())
        except Exception as exc:  # a scrape must answer even when the store does not
            log.warning("%s unavailable: %s", what, type(exc).__name__)
            gauge.set(-1)

    return update


class HttpMetricsMiddleware:
    """Counts and times every HTTP request by method, route template and status.

    Install it outermost (add it last), so refusals by other middleware are counted too.
    """

    def __init__(self, app: ASGIApp, service: str):
        self.app = app
        self.service = service

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # what the server error handler answers if the app raises

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            with origin("http"):
                await self.app(scope, receive, send_status)
        finally:
            method = scope["method"] if scope["method"] in METHODS else "OTHER"
            labels = (self.service, method, route_template(scope), str(status))
            HTTP_REQUESTS.labels(*labels).inc()
            HTTP_DURATION.labels(*labels).observe(time.perf_counter() - started)


def route_template(scope: Scope) -> str:
    """The template of the route that served the request (also for a 405), or "unmatched":
    an unknown path, or a request refused before routing (a body limit; its status says so).

    The router leaves the matched route in the scope. Its path carries the APIRouter's own
    prefix, which is where every Tessera router declares it (a prefix given to include_router
    would be missing here; the label would still hold no ids).
    """
    path = getattr(scope.get("route"), "path", None)
    return path if isinstance(path, str) else UNMATCHED
