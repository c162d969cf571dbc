"""What endpoints receive: the app context, the authenticated principal, the idempotency key.

Authentication (answered from the replica's principal cache when it may, services/api/
principals.py) is followed at once by the plan's rate limit (services/api/limits.py); the
pass-creating endpoints (v1 and Variant A) also call `ApiContext.reserve_pass`
for the monthly quota. Both limits take their units from leased blocks (services/api/leases.py).
"""

import hmac
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import Depends, Header, Request
from faststream.nats import NatsBroker
from starlette.datastructures import Headers
from starlette.types import Scope

from services.api.accounts import Principal, authenticate
from services.api.config import ApiSettings
from services.api.events_out import record_observed_event
from services.api.idempotency import IdempotencyPolicy
from services.api.leases import QuotaLeases, RateLeases
from services.api.limits import (
    admit_admin_attempt,
    enforce_rate_limit,
    reserve_pass,
)
from services.api.observed_limit import ObservedEventLimit
from services.api.pages.save_links import SaveLinks
from services.api.principals import PrincipalCache
from services.api.query_params import refuse_unknown_query_params
from services.api.repository import ApiRepository
from services.api.scanner_keys import refuse_scanner_key
from services.events.reads import DeviceLogReads, EventReads
from services.issuer.reads import IssuerReads
from services.webhooks.reads import WebhookReads
from shared.clock import Clock
from shared.errors import AuthenticationError, NotFound
from shared.logs import account_id_var
from shared.messages import Command, PassEventType, R
from shared.models import PassRecord
from shared.nats import request_command

# How many request timeouts a long command (a batch) may take.
LONG_COMMAND_FACTOR = 2


@dataclass
class ApiContext:
    settings: ApiSettings
    repo: ApiRepository
    issuer: IssuerReads
    events: EventReads
    device_logs: DeviceLogReads
    webhooks: WebhookReads
    broker: NatsBroker
    clock: Clock
    idempotency: IdempotencyPolicy
    principals: PrincipalCache
    rate_leases: RateLeases
    quota_leases: QuotaLeases
    observed_limit: ObservedEventLimit = field(default_factory=ObservedEventLimit)
    save_links: SaveLinks = field(default_factory=SaveLinks)

    async def record_event(
        self, record: PassRecord, event_type: PassEventType, metadata: dict[str, Any] | None = None
    ) -> None:
        """A page view, download or add intent of `record`, once its response was sent; not
        past the pass's cap of such events a minute (services/api/observed_limit.py)."""
        if not self.observed_limit.allow(record.id, self.clock.now()):
            return
        await record_observed_event(
            self.repo.outbox, self.clock, self.issuer, record, event_type, metadata
        )

    async def authenticate(self, presented: str | None) -> Principal:
        """The principal of a presented API key; 401 when it is missing, unknown or revoked."""
        return await self.principals.authenticate(self.repo, presented)

    async def enforce_rate_limit(self, principal: Principal) -> None:
        """429 when the principal's window is full; records the RateLimit headers."""
        await enforce_rate_limit(self.rate_leases, self.settings.plans, self.clock, principal)

    async def reserve_pass(self, principal: Principal) -> None:
        """402 when this month's pass quota is used up; else reserve one pass of it."""
        await reserve_pass(self.quota_leases, self.settings.plans, self.clock, principal)

    async def command(self, command: Command[R], *, long: bool = False) -> R:
        """Send a command to the service that owns its data; its typed result. A `long` one
        (a batch of up to 100 passes) may take twice the request timeout, which still ends
        before its Idempotency-Key's lock (twice the timeout plus 5 s) could be taken over."""
        timeout = self.settings.request_timeout_seconds * (LONG_COMMAND_FACTOR if long else 1)
        return await request_command(self.broker, command, timeout)


async def _context(request: Request) -> ApiContext:
    # async: FastAPI would run a plain function in a worker thread on every request.
    context: ApiContext = request.app.state.context
    return context


ContextDep = Annotated[ApiContext, Depends(_context)]


def _bearer(authorization: str | None) -> str | None:
    if authorization is None:
        return None
    scheme, _, value = authorization.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        raise AuthenticationError(
            "Malformed Authorization header; expected 'Bearer <API_KEY>'.", code="invalid_api_key"
        )
    return value.strip()


async def _principal(
    ctx: ContextDep,
    request: Request,
    authorization: Annotated[str | None, Header(include_in_schema=False)] = None,
) -> Principal:
    principal = await ctx.authenticate(_bearer(authorization))
    account_id_var.set(principal.account_id)
    # The one place a scanner key is held to its routes (services/api/scanner_keys.py).
    route = getattr(request.scope.get("route"), "path", None)
    refuse_scanner_key(principal, request.method, route)
    await ctx.enforce_rate_limit(principal)
    # After authentication, like body validation: a stranger learns nothing of a route.
    refuse_unknown_query_params(request)
    return principal


PrincipalDep = Annotated[Principal, Depends(_principal)]


async def _variant_a_principal(
    ctx: ContextDep,
    x_api_key: Annotated[str | None, Header(alias="x-api-key", include_in_schema=False)] = None,
) -> Principal:
    """Variant A's `x-api-key`, then what every authenticated request passes (a scanner key
    refused, the plan's live-key rule and rate limit), before the body's fields are looked at
    (docs/api-decisions.md, the order of the checks). The quota is taken by the endpoint, once
    the body is known to be valid."""
    principal = await authenticate(ctx.repo, x_api_key)
    account_id_var.set(principal.account_id)
    refuse_scanner_key(principal, "POST", None)
    await ctx.enforce_rate_limit(principal)
    return principal


VariantAPrincipalDep = Annotated[Principal, Depends(_variant_a_principal)]


async def authenticate_uploader(ctx: ApiContext, scope: Scope) -> None:
    """The authentication of a route that takes bodies over the default limit (the imports),
    run before its body is read (services/api/middleware.py): what `_principal` checks of the
    key, without the rate limit, which the route then counts."""
    principal = await ctx.authenticate(_bearer(Headers(scope=scope).get("authorization")))
    refuse_scanner_key(principal, scope["method"], scope["path"])


async def authenticate_unread_body(request: Request) -> None:
    """Authenticate a request whose body could not be read as JSON, as its route would have.

    FastAPI reads the body before it runs a route's dependencies, so without this a stranger
    would get 400 `invalid_json` where a well-formed body gets 401: authentication comes first
    (docs/api-decisions.md). Raises the route's authentication error; a route without an
    API key (the public pages, the wallet callbacks) raises nothing.
    """
    route = request.scope.get("route")
    dependant = getattr(route, "dependant", None)
    calls = _dependency_calls(dependant) if dependant is not None else set()
    ctx = await _context(request)
    if _principal in calls:
        await _principal(ctx, request, request.headers.get("authorization"))
    elif _variant_a_principal in calls:
        await _variant_a_principal(ctx, request.headers.get("x-api-key"))
    elif _admin in calls:
        await _admin(ctx, request, request.headers.get("authorization"))


def _dependency_calls(dependant: Any) -> set[Any]:
    calls = set()
    for dependency in dependant.dependencies:
        calls.add(dependency.call)
        calls |= _dependency_calls(dependency)
    return calls


async def _admin(
    ctx: ContextDep,
    request: Request,
    authorization: Annotated[str | None, Header(include_in_schema=False)] = None,
) -> None:
    token = ctx.settings.admin_token
    if token is None:
        # The operator API does not exist unless configured.
        raise NotFound("Unrecognized request URL.", code="route_unknown")
    # Behind a proxy this is the proxy's address unless uvicorn is told to trust its
    # X-Forwarded-For (FORWARDED_ALLOW_IPS; docs/operations.md).
    client = request.client.host if request.client else "unknown"
    limit = ctx.settings.admin_guesses_per_window
    right_token = await admit_admin_attempt(ctx.repo, ctx.clock, client, limit)
    try:
        presented = _bearer(authorization) or ""
    except AuthenticationError:
        presented = ""
    if not hmac.compare_digest(presented.encode(), token.get_secret_value().encode()):
        raise AuthenticationError("Invalid admin token.", code="invalid_admin_token")
    await right_token()
    refuse_unknown_query_params(request)


AdminDep = Depends(_admin)

IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key", description="Replays within 24 hours return the first response."
    ),
]
