"""Plans, quotas and rate limits as units: the plan table, windows, months, and the limiter
and its leased blocks against the counters on the real store (many replicas on them:
tests/api/test_leases.py; through HTTP: tests/e2e/test_limits.py).
"""

from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any, cast

import pytest

from services.api.accounts import Principal
from services.api.config import ApiSettings, PlanLimits, default_plans
from services.api.deps import ApiContext
from services.api.leases import QuotaLeases, RateLeases
from services.api.limits import (
    RequestLimits,
    enforce_rate_limit,
    month_key,
    next_month,
    plan_limits,
    release_passes,
    request_limits_var,
    reserve_pass,
    reserve_passes,
    window_start,
)
from services.api.repository import ApiRepository
from services.api.row_units import RowUnits
from shared.errors import AuthorizationError, BillingError, RateLimited
from shared.models import Mode
from shared.mongo import Database
from tests.support.database import commands_sent
from tests.support.inproc_api import ManualClock

START = datetime(2026, 1, 31, 23, 59, 58, 500_000, tzinfo=UTC)


@pytest.fixture
def repo(db: Database) -> ApiRepository:
    """The counters on the real store. Without the repository's TTL indexes: the tests' clock
    is in January 2026, so every counter they make has already expired, and the store's TTL
    monitor could delete it mid-test."""
    return ApiRepository(db)


def _plans(**free: Any) -> dict[str, PlanLimits]:
    return {**default_plans(), "free": PlanLimits(**free)}


def _principal(plan: str = "free", mode: Mode = "test") -> Principal:
    return Principal(account_id="account_1", mode=mode, plan=plan, key_id="api_key_1")


def test_defaults_are_documented_values() -> None:
    plans = ApiSettings().plans
    assert not plans["free"].live_keys
    assert plans["paid"].live_keys
    assert plans["free"].rate_limit == 100
    assert plans["free"].rate_window_seconds == 1
    assert plans["free"].monthly_passes.test == 1_000_000
    assert plans["free"].monthly_passes.live == 0
    assert plans["paid"].rate_limit == 1_000
    assert plans["paid"].monthly_passes.live == 1_000_000


def test_the_plan_table_is_overridden_by_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "TESSERA_API_PLANS",
        '{"free": {"rate_limit": 5, "rate_window_seconds": 60, "monthly_passes": {"test": 3}},'
        ' "gold": {"live_keys": true}}',
    )
    plans = ApiSettings().plans
    assert plans["free"].rate_limit == 5
    assert plans["free"].rate_window_seconds == 60
    assert plans["free"].monthly_passes.test == 3
    assert plans["gold"].live_keys
    assert "paid" not in plans


def test_a_table_without_the_free_plan_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TESSERA_API_PLANS", '{"paid": {}}')
    with pytest.raises(ValueError, match="free"):
        ApiSettings()


def test_an_unknown_plan_gets_the_free_limits() -> None:
    plans = default_plans()
    assert plan_limits(plans, "enterprise") is plans["free"]


def test_windows_and_months() -> None:
    assert window_start(START, 1) == START.replace(microsecond=0)
    assert window_start(START, 60) == START.replace(second=0, microsecond=0)
    assert month_key(START) == "2026-01"
    assert next_month(START) == datetime(2026, 2, 1, tzinfo=UTC)
    assert next_month(datetime(2026, 12, 15, tzinfo=UTC)) == datetime(2027, 1, 1, tzinfo=UTC)


async def test_the_rate_limit_counts_a_fixed_window_and_sets_headers(repo: ApiRepository) -> None:
    leases = RateLeases(repo)
    plans = _plans(rate_limit=2, rate_window_seconds=10)
    clock = ManualClock(START)

    async def attempt() -> RequestLimits:
        state = RequestLimits()
        request_limits_var.set(state)
        try:
            await enforce_rate_limit(leases, plans, clock, _principal())
        except RateLimited as exc:
            state.headers["refused"] = f"{exc.status} {exc.code}"
        return state

    first, second, third = [await attempt() for _ in range(3)]
    # START is 8.5 s into its 10-second window: 1.5 s left, rounded up.
    assert first.headers == {
        "RateLimit-Limit": "2",
        "RateLimit-Remaining": "1",
        "RateLimit-Reset": "2",
    }
    assert second.headers["RateLimit-Remaining"] == "0"
    assert "refused" not in second.headers
    assert third.headers["refused"] == "429 rate_limited"
    assert third.headers["Retry-After"] == "2"
    assert third.headers["RateLimit-Remaining"] == "0"
    clock.advance(2)
    fresh = await attempt()
    assert "refused" not in fresh.headers
    assert fresh.headers["RateLimit-Remaining"] == "1"


async def test_live_keys_need_a_plan_with_them(repo: ApiRepository) -> None:
    leases = RateLeases(repo)
    clock = ManualClock(START)
    with pytest.raises(AuthorizationError) as caught:
        await enforce_rate_limit(leases, default_plans(), clock, _principal("free", "live"))
    assert caught.value.status == 403
    await enforce_rate_limit(leases, default_plans(), clock, _principal("paid", "live"))


async def test_the_quota_counts_per_mode_and_month_and_gives_back_failures(
    repo: ApiRepository,
) -> None:
    quota = QuotaLeases(repo)
    plans = _plans(monthly_passes={"test": 2, "live": 0})
    clock = ManualClock(START)

    async def reserve(mode: Mode = "test") -> RequestLimits:
        state = RequestLimits()
        request_limits_var.set(state)
        await reserve_pass(quota, plans, clock, _principal(mode=mode))
        return state

    failed = await reserve()
    for step in failed.on_failure:
        await step()
    # The unit stays with this replica, unused: the next creation takes it without a write.
    assert await repo.usage("account_1:test:2026-01") == 1
    with commands_sent() as sent:
        await reserve()
    assert sent == []
    await reserve()
    with pytest.raises(BillingError) as caught:
        await reserve()
    assert caught.value.status == 402
    assert caught.value.code == "quota_exceeded"
    assert "2026-02-01" in caught.value.message
    with pytest.raises(BillingError):
        await reserve("live")
    clock.advance(2)  # into February: a new month, a new count
    await reserve()
    assert await repo.usage("account_1:test:2026-02") == 1
    assert await repo.usage("account_1:test:2026-01") == 2
    assert await repo.usage("account_1:live:2026-01") == 0


async def test_units_reserved_in_a_month_that_is_over_are_not_given_to_the_next(
    repo: ApiRepository,
) -> None:
    """An import created on January 31 and canceled on February 1 had its units counted in
    January: they do not go to February's quota, which would then allow more passes than
    its limit (docs/plans-and-limits.md)."""
    quota = QuotaLeases(repo)
    plans = _plans(monthly_passes={"test": 3, "live": 0})
    clock = ManualClock(START)
    principal = _principal()
    assert await reserve_passes(quota, plans, clock, principal, 3) == 3
    clock.advance(2)  # February
    assert await reserve_passes(quota, plans, clock, principal, 3) == 3
    release_passes(quota, clock, principal, 3, reserved_at=START)  # the import canceled now
    assert await reserve_passes(quota, plans, clock, principal, 1) == 0
    # Units of this month's reservations do go back.
    release_passes(quota, clock, principal, 1, reserved_at=clock.now())
    assert await reserve_passes(quota, plans, clock, principal, 1) == 1


async def test_a_requests_units_keep_the_month_they_were_reserved_in(
    repo: ApiRepository,
) -> None:
    """A batch reserving on January 31 whose refused rows came back on February 1 (or whose
    retry took its key over the next day) gave them to February's quota: the reservation's
    time travels with its count (kept with the key, sent with an import's rows)."""
    quota = QuotaLeases(repo)
    clock = ManualClock(START)
    ctx = cast(
        ApiContext,
        SimpleNamespace(
            quota_leases=quota,
            clock=clock,
            settings=SimpleNamespace(plans=_plans(monthly_passes={"test": 3, "live": 0})),
        ),
    )

    async def three() -> int:
        return 3

    first = RowUnits(ctx, _principal(), three)
    kept = await first.admission().first()
    assert kept == {"units": 3, "reserved_at": START}
    clock.advance(2)  # February
    retry = RowUnits(ctx, _principal(), three)
    again = retry.admission().again
    assert again is not None
    await again(kept)
    assert (await retry.granted(), retry.reserved_at) == (3, START)
    assert await reserve_passes(quota, ctx.settings.plans, clock, _principal(), 3) == 3
    release_passes(quota, clock, _principal(), 2, reserved_at=retry.reserved_at)
    assert await reserve_passes(quota, ctx.settings.plans, clock, _principal(), 1) == 0


async def test_a_window_of_another_length_is_another_counter(
    repo: ApiRepository, db: Database
) -> None:
    """A plan moved from 1-second to hour-long windows within the first second of an hour:
    the hour counted on in the second's counter, which expires minutes later (its count
    then started again mid-hour, letting twice the limit through)."""
    leases = RateLeases(repo)
    clock = ManualClock(datetime(2026, 2, 1, 0, 0, 0, 200_000, tzinfo=UTC))
    request_limits_var.set(RequestLimits())
    second = _plans(rate_limit=100, rate_window_seconds=1)
    await enforce_rate_limit(leases, second, clock, _principal())
    hour = _plans(rate_limit=100, rate_window_seconds=3600)
    await enforce_rate_limit(RateLeases(repo), hour, clock, _principal())
    windows = await db["rate_limit_windows"].find({}).to_list()
    assert len(windows) == 2
    assert max(w["expires_at"] for w in windows) >= datetime(2026, 2, 1, 1, tzinfo=UTC)
