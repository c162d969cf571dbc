"""Plans, quotas and rate limits as units: the plan table, windows, months, and the limiter
and its leased blocks against an in-memory stand-in for the MongoDB counters (the real ones:
tests/api/test_leases.py and tests/e2e/test_limits.py).
"""

import asyncio
from datetime import UTC, datetime
from typing import Any, cast

import pytest

from services.api.accounts import Principal
from services.api.config import ApiSettings, PlanLimits, default_plans
from services.api.leases import QuotaLeases, RateLeases
from services.api.limits import (
    RequestLimits,
    enforce_rate_limit,
    month_key,
    next_month,
    plan_limits,
    request_limits_var,
    reserve_pass,
    window_start,
)
from services.api.repository import ApiRepository
from shared.errors import AuthorizationError, BillingError, RateLimited
from shared.models import Mode
from tests.support.inproc_api import ManualClock

START = datetime(2026, 1, 31, 23, 59, 58, 500_000, tzinfo=UTC)


class FakeCounters:
    """The counter methods of ApiRepository, in memory, with the same contract."""

    def __init__(self) -> None:
        self.windows: dict[str, int] = {}
        self.usage: dict[str, int] = {}
        self.writes = 0

    @staticmethod
    def _lease(counts: dict[str, int], key: str, want: int, limit: int) -> tuple[int, int]:
        for size in (want, 1):
            if counts.get(key, 0) + size <= limit:
                counts[key] = counts.get(key, 0) + size
                return size, counts[key]
        return 0, limit

    async def lease_window(
        self, window_id: str, want: int, limit: int, expires_at: datetime
    ) -> tuple[int, int]:
        self.writes += 1
        return self._lease(self.windows, window_id, want, limit)

    async def lease_usage(
        self, counter_id: str, want: int, limit: int, expires_at: datetime
    ) -> tuple[int, int]:
        self.writes += 1
        return self._lease(self.usage, counter_id, want, limit)

    async def release_usage(self, counter_id: str, units: int = 1) -> None:
        self.writes += 1
        self.usage[counter_id] -= units


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


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_the_rate_limit_counts_a_fixed_window_and_sets_headers() -> None:
    leases = RateLeases(cast(ApiRepository, FakeCounters()))
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

    first, second, third = (_run(attempt()) for _ in range(3))
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
    fresh = _run(attempt())
    assert "refused" not in fresh.headers
    assert fresh.headers["RateLimit-Remaining"] == "1"


def test_live_keys_need_a_plan_with_them() -> None:
    leases = RateLeases(cast(ApiRepository, FakeCounters()))
    clock = ManualClock(START)
    with pytest.raises(AuthorizationError) as caught:
        _run(enforce_rate_limit(leases, default_plans(), clock, _principal("free", "live")))
    assert caught.value.status == 403
    _run(enforce_rate_limit(leases, default_plans(), clock, _principal("paid", "live")))


def test_the_quota_counts_per_mode_and_month_and_gives_back_failures() -> None:
    counters = FakeCounters()
    quota = QuotaLeases(cast(ApiRepository, counters))
    plans = _plans(monthly_passes={"test": 2, "live": 0})
    clock = ManualClock(START)

    async def reserve(mode: Mode = "test") -> RequestLimits:
        state = RequestLimits()
        request_limits_var.set(state)
        await reserve_pass(quota, plans, clock, _principal(mode=mode))
        return state

    failed = _run(reserve())
    for step in failed.on_failure:
        _run(step())
    # The unit stays with this replica, unused: the next creation takes it without a write.
    assert counters.usage == {"account_1:test:2026-01": 1}
    writes = counters.writes
    _run(reserve())
    assert counters.writes == writes
    _run(reserve())
    with pytest.raises(BillingError) as caught:
        _run(reserve())
    assert caught.value.status == 402
    assert caught.value.code == "quota_exceeded"
    assert "2026-02-01" in caught.value.message
    with pytest.raises(BillingError):
        _run(reserve("live"))
    clock.advance(2)  # into February: a new month, a new count
    _run(reserve())
    assert counters.usage["account_1:test:2026-02"] == 1
    assert counters.usage["account_1:test:2026-01"] == 2
