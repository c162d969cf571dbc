"""The monthly quota's units for the rows of one request (a batch, an import), reserved once
per Idempotency-Key (docs/plans-and-limits.md).

The first run reserves as many units as the quota has for the rows that want one, and the
count is kept with the key (`Admission`). A retry that takes the key over after a timeout or a
5xx re-sends the rows the first run sent with that count, so no unit is taken twice and every
row that made a pass answers as it did.
"""

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from services.api.accounts import Principal
from services.api.deps import ApiContext
from services.api.idempotency import Admission
from services.api.limits import quota_exhausted, reserve_passes


class RowUnits:
    def __init__(
        self,
        ctx: ApiContext,
        principal: Principal,
        wanted: Callable[[], Awaitable[int]],
        *,
        none_refuses: bool = False,
    ) -> None:
        """`wanted()`: how many rows want a unit. With `none_refuses`, a quota with no unit for
        them refuses the whole request (402) instead of answering each row's 402."""
        self._ctx = ctx
        self._principal = principal
        self._wanted = wanted
        self._none_refuses = none_refuses
        self._granted: int | None = None
        # When the units were reserved: they go back to that month's quota only (None: kept by
        # a run before 2026-11-28, which did not say).
        self.reserved_at: datetime | None = None

    async def granted(self) -> int:
        """The units the rows have: the first run's count (also on a retry that took the key
        over), or reserved now if none is known (no key, or the first run stopped between
        reserving and keeping its count)."""
        if self._granted is None:
            await self._reserve()
        assert self._granted is not None
        return self._granted

    def admission(self) -> Admission:
        return Admission(self._reserve, self._reserved_before)

    async def _reserve(self) -> dict[str, Any]:
        ctx, principal, plans = self._ctx, self._principal, self._ctx.settings.plans
        wanted = await self._wanted()
        at = ctx.clock.now()
        granted = await reserve_passes(ctx.quota_leases, plans, ctx.clock, principal, wanted, at)
        if self._none_refuses and wanted and not granted:
            raise quota_exhausted(plans, ctx.clock, principal)
        self._granted, self.reserved_at = granted, at
        return {"units": granted, "reserved_at": at}

    async def _reserved_before(self, kept: Any) -> None:
        if isinstance(kept, dict):
            self._granted, self.reserved_at = kept["units"], kept["reserved_at"]
        else:  # a count alone (kept before 2026-11-28), or nothing kept
            self._granted = kept if isinstance(kept, int) else None
