"""Plans, quotas and rate limits (spec 5 and 7, docs/plans-and-limits.md).

- The rate limit is a fixed window per API key mode (account + test/live): the plan's
  `rate_limit` requests per `rate_window_seconds`. The count lives in MongoDB, so it holds across
  api replicas; each replica leases units from it in blocks (services/api/leases.py). Over it:
  429 `rate_limit_error` (`rate_limited`) with `Retry-After`.
- The quota counts passes issued per account, mode and calendar month (UTC), leased in blocks the
  same way. A creation request reserves one unit before the pass is made and gives it back when
  it is refused (4xx). After a 5xx (a timeout, say) the pass may exist, so the unit stays: the
  quota counts every pass that exists, and a retry with the same Idempotency-Key costs nothing
  more. Over it: 402 `billing_error` (`quota_exceeded`), before any pass is created.
- A capability the plan lacks (live keys on a plan without them): 403 `authorization_error`.

Every authenticated response carries `RateLimit-Limit`, `RateLimit-Remaining` and
`RateLimit-Reset` (IETF draft names); the middleware writes the headers this module computes.
"""

import ipaddress
import logging
import math
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from services.api.accounts import Principal
from services.api.config import PlanLimits
from services.api.leases import QuotaLeases, RateLeases
from services.api.repository import ApiRepository
from shared.clock import Clock
from shared.errors import AuthorizationError, BillingError, RateLimited

log = logging.getLogger(__name__)
# Counters outlive their window by this much, then MongoDB's TTL monitor removes them.
WINDOW_GRACE = timedelta(minutes=5)
USAGE_RETENTION = timedelta(days=400)


@dataclass
class RequestLimits:
    """What the limits decided for one request: headers to add, and undo steps on failure."""

    headers: dict[str, str] = field(default_factory=dict)
    on_failure: list[Callable[[], Awaitable[None]]] = field(default_factory=list)


# Set per request by the middleware; the limits below write into it.
request_limits_var: ContextVar[RequestLimits | None] = ContextVar("request_limits", default=None)


def plan_limits(plans: dict[str, PlanLimits], plan: str) -> PlanLimits:
    limits = plans.get(plan)
    if limits is None:
        log.warning("plan %r is not in the plan table; applying the free plan's limits", plan)
        return plans["free"]
    return limits


def window_start(now: datetime, seconds: int) -> datetime:
    epoch = int(now.timestamp())
    return datetime.fromtimestamp(epoch - epoch % seconds, UTC)


def month_key(now: datetime) -> str:
    return now.astimezone(UTC).strftime("%Y-%m")


def next_month(now: datetime) -> datetime:
    now = now.astimezone(UTC)
    year, month = (now.year + 1, 1) if now.month == 12 else (now.year, now.month + 1)
    return datetime(year, month, 1, tzinfo=UTC)


def rate_headers(limit: int, count: int, reset_seconds: int) -> dict[str, str]:
    return {
        "RateLimit-Limit": str(limit),
        "RateLimit-Remaining": str(max(0, limit - count)),
        "RateLimit-Reset": str(reset_seconds),
    }


def check_capabilities(plan: PlanLimits, principal: Principal) -> None:
    if principal.mode == "live" and not plan.live_keys:
        raise AuthorizationError(
            "Live keys require a paid plan; use a test key or upgrade the plan.",
            code="live_mode_requires_paid_plan",
        )


async def enforce_rate_limit(
    leases: RateLeases, plans: dict[str, PlanLimits], clock: Clock, principal: Principal
) -> None:
    """Count this request in its window; 429 when the window is full."""
    plan = plan_limits(plans, principal.plan)
    check_capabilities(plan, principal)
    now = clock.now()
    start = window_start(now, plan.rate_window_seconds)
    end = start + timedelta(seconds=plan.rate_window_seconds)
    scope = f"{principal.account_id}:{principal.mode}"
    # The window's length in its id: a plan change to a longer window at the start of a short
    # one would count on in the short one's counter, whose expiry came long before the end.
    window_id = f"{scope}:{plan.rate_window_seconds}s:{int(start.timestamp())}"
    taken = await leases.take(scope, window_id, plan.rate_limit, end + WINDOW_GRACE)
    reset = max(1, math.ceil((end - now).total_seconds()))
    headers = rate_headers(plan.rate_limit, plan.rate_limit - taken.remaining, reset)
    state = request_limits_var.get()
    if not taken.admitted:
        headers["Retry-After"] = str(reset)
    if state is not None:
        state.headers.update(headers)
    if not taken.admitted:
        raise RateLimited(
            f"Too many requests: the limit is {plan.rate_limit} per "
            f"{plan.rate_window_seconds} s. Retry after {reset} s.",
            code="rate_limited",
        )


async def reserve_pass(
    quota: QuotaLeases, plans: dict[str, PlanLimits], clock: Clock, principal: Principal
) -> None:
    """Reserve one pass of this month's quota; 402 when it is used up.

    The unit is given back when the request is refused (the middleware runs `on_failure` for a
    4xx), so every pass that exists is counted and no refused request is.
    """
    plan = plan_limits(plans, principal.plan)
    now = clock.now()
    limit = getattr(plan.monthly_passes, principal.mode)
    month = month_key(now)
    counter_id = f"{principal.account_id}:{principal.mode}:{month}"
    if not await quota.reserve(counter_id, month, limit, next_month(now) + USAGE_RETENTION):
        raise BillingError(
            f"The monthly quota of {limit} {principal.mode}-mode passes of the "
            f"'{principal.plan}' plan is used up; it resets on {next_month(now):%Y-%m-%d} UTC.",
            code="quota_exceeded",
        )
    state = request_limits_var.get()
    if state is not None:

        async def give_back() -> None:
            quota.release(counter_id, month)

        state.on_failure.append(give_back)


# Wrong admin tokens from one client address are counted per window of this length; past the
# limit (TESSERA_API_ADMIN_GUESSES_PER_WINDOW) every admin request from it waits for the next.
ADMIN_FAILURE_WINDOW_SECONDS = 300


def _admin_window(clock: Clock, client: str) -> tuple[str, datetime]:
    start = window_start(clock.now(), ADMIN_FAILURE_WINDOW_SECONDS)
    end = start + timedelta(seconds=ADMIN_FAILURE_WINDOW_SECONDS)
    return f"admin-failures:{client}:{int(start.timestamp())}", end


async def admit_admin_attempt(
    repo: ApiRepository, clock: Clock, client: str, limit: int
) -> Callable[[], Awaitable[None]]:
    """Count this attempt at the admin token before it is judged, so that concurrent guesses
    cannot all slip under the limit; 429 once the client's window holds `limit` of them,
    whatever it presents now (answering a right token would confirm a guess). Returns what
    takes the attempt back out of the count when the token was right: only wrong ones stay."""
    window_id, end = _admin_window(clock, client_key(client))
    if await repo.count_request(window_id, end + WINDOW_GRACE) <= limit:

        async def right_token() -> None:
            await repo.uncount_request(window_id)

        return right_token
    reset = max(1, math.ceil((end - clock.now()).total_seconds()))
    state = request_limits_var.get()
    if state is not None:
        state.headers["Retry-After"] = str(reset)
    raise RateLimited(
        f"Too many wrong admin tokens from this address; retry after {reset} s.",
        code="admin_token_rate_limited",
    )


def client_key(host: str) -> str:
    """Whose guesses count together: an IPv4 address, or an IPv6 address's /64 (one
    subscriber's network, whose addresses it can change at will)."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.ip_network(f"{address}/64", strict=False))
    return str(address)


# Many passes in one request (POST /v1/passes/batch, import jobs: issue 12). Kept apart from
# `reserve_pass` and built on the same QuotaLeases calls only.


def quota_exhausted(
    plans: dict[str, PlanLimits], clock: Clock, principal: Principal
) -> BillingError:
    """The 402 of a pass (a row of a batch or an import) past this month's quota."""
    plan = plan_limits(plans, principal.plan)
    now = clock.now()
    limit = getattr(plan.monthly_passes, principal.mode)
    return BillingError(
        f"The monthly quota of {limit} {principal.mode}-mode passes of the "
        f"'{principal.plan}' plan is used up; it resets on {next_month(now):%Y-%m-%d} UTC.",
        code="quota_exceeded",
    )


async def reserve_passes(
    quota: QuotaLeases,
    plans: dict[str, PlanLimits],
    clock: Clock,
    principal: Principal,
    wanted: int,
    at: datetime | None = None,
) -> int:
    """Reserve up to `wanted` passes of the quota of the month of `at` (default now); how many
    were (0 when it is used up). All of them are given back if the request is refused (4xx);
    the request gives back those of rows that made no pass with `release_passes`."""
    plan = plan_limits(plans, principal.plan)
    now = at or clock.now()
    limit = getattr(plan.monthly_passes, principal.mode)
    month = month_key(now)
    counter_id = f"{principal.account_id}:{principal.mode}:{month}"
    expires_at = next_month(now) + USAGE_RETENTION
    granted = 0
    # Units come from the replica's leased block (one store write per block, not per unit).
    while granted < wanted and await quota.reserve(counter_id, month, limit, expires_at):
        granted += 1
    state = request_limits_var.get()
    if state is not None and granted:

        async def give_back() -> None:
            release_passes(quota, clock, principal, granted, reserved_at=now)

        state.on_failure.append(give_back)
    return granted


def release_passes(
    quota: QuotaLeases,
    clock: Clock,
    principal: Principal,
    units: int,
    reserved_at: datetime | None = None,
) -> None:
    """Give back reserved units that made no pass (rows refused by the issuer, an import's rows
    canceled). Units reserved in an earlier month (`reserved_at`) are not given to this one:
    that month is over, and this month's quota would grow by them."""
    month = month_key(clock.now())
    if reserved_at is not None and month_key(reserved_at) != month:
        return
    counter_id = f"{principal.account_id}:{principal.mode}:{month}"
    for _ in range(units):
        quota.release(counter_id, month)
