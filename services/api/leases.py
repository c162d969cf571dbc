"""Rate-limit and quota units leased in blocks from the shared counters.

The counters in MongoDB stay the one truth every api replica counts against (services/api/
limits.py), but a replica takes units from them a block at a time and hands them out from
memory: one store write per block instead of one per request. A unit is in the shared count
before it is used, so the limit and the quota are never exceeded, whatever the number of
replicas. What a replica leased and did not use is lost to that window (rate) or given back
(quota: when the replica stops, and when the month changes), so an account may be refused a
little early, never late.

A block belongs to the limit it was leased under: when the account's plan changes, what a
replica holds under the old limit is not handed out any more (the quota's goes back to the
counter), and the next unit is leased against the new limit, which the shared count may already
exceed.

Blocks start at one unit, double while the demand lasts, and are capped by the limit and by what
is left in the shared counter, so that units stranded on other replicas stay a small share of
what is left (`MAX_SHARE`) and a small limit (the tests' 5 requests, 3 passes) is counted unit by
unit, exactly as before.
"""

import logging
from dataclasses import dataclass
from datetime import datetime

from services.api.repository import ApiRepository

log = logging.getLogger(__name__)

# At most this share of a limit, or of what is left of it, is leased in one block.
MAX_SHARE = 32
MAX_RATE_BLOCK = 1024
MAX_QUOTA_BLOCK = 256
# Windows this replica no longer needs are forgotten once it tracks this many.
MAX_WINDOWS = 4096


def block_size(wanted: int, limit: int, left: int, most: int) -> int:
    """How many units to lease: `wanted` (the doubling demand), at most `most` and a
    `MAX_SHARE`-th of the limit and of what is `left` of it, at least one."""
    return max(1, min(wanted, most, limit // MAX_SHARE, left // MAX_SHARE))


@dataclass
class _Block:
    limit: int  # the limit its units were leased under
    left: int = 0  # leased, not yet handed out
    counted: int = 0  # the shared count after this replica's last lease
    wanted: int = 1  # the next block's size, before the caps
    full: bool = False  # the shared counter had nothing left


@dataclass(frozen=True)
class Taken:
    admitted: bool
    remaining: int  # for RateLimit-Remaining: the limit less what is counted, plus our unused


class RateLeases:
    """One replica's units of each rate-limit window."""

    def __init__(self, repo: ApiRepository) -> None:
        self._repo = repo
        self._windows: dict[str, _Block] = {}
        # The block size a scope (account and mode) ended its last window with.
        self._demand: dict[str, int] = {}

    async def take(self, scope: str, window_id: str, limit: int, expires_at: datetime) -> Taken:
        block = self._windows.get(window_id)
        if block is None:
            if len(self._windows) >= MAX_WINDOWS:
                self._windows.clear()
            block = self._windows[window_id] = _Block(limit, wanted=self._demand.get(scope, 1))
        if block.limit != limit:
            # The plan changed: units leased under the old limit are not handed out.
            block.limit, block.left, block.full = limit, 0, False
        if block.left == 0 and not block.full:
            size = block_size(block.wanted, limit, limit - block.counted, MAX_RATE_BLOCK)
            granted, counted = await self._repo.lease_window(window_id, size, limit, expires_at)
            block.counted = max(block.counted, counted)
            if granted == 0:
                block.full = True
            else:
                block.left += granted
                block.wanted = min(MAX_RATE_BLOCK, granted * 2)
                self._demand[scope] = max(1, granted // 2)
        if block.left == 0:
            return Taken(False, 0)
        block.left -= 1
        return Taken(True, max(0, limit - block.counted + block.left))


@dataclass
class _Pool:
    month: str
    limit: int | None  # the limit its units were leased under; None: given back ones only
    left: int = 0
    counted: int = 0
    wanted: int = 1


class QuotaLeases:
    """One replica's units of each monthly pass quota; unused ones go back to the counter."""

    def __init__(self, repo: ApiRepository) -> None:
        self._repo = repo
        self._pools: dict[str, _Pool] = {}

    async def reserve(self, counter_id: str, month: str, limit: int, expires_at: datetime) -> bool:
        """One unit of the quota; False when it is used up."""
        if limit <= 0:
            return False
        pool = self._pools.get(counter_id)
        while pool is None or pool.limit != limit:
            if pool is None:
                await self._give_back_other_months(month)
            else:
                # The plan changed: what this replica holds goes back to be counted anew.
                await self._give_back(counter_id)
            # Another request may have made the pool while this one gave units back.
            pool = self._pools.get(counter_id)
            if pool is None:
                pool = self._pools[counter_id] = _Pool(month, limit)
        if pool.left == 0:
            size = block_size(pool.wanted, limit, limit - pool.counted, MAX_QUOTA_BLOCK)
            granted, counted = await self._repo.lease_usage(counter_id, size, limit, expires_at)
            pool.counted = max(pool.counted, counted)
            if granted == 0:
                return False
            pool.left += granted
            pool.wanted = min(MAX_QUOTA_BLOCK, granted * 2)
        pool.left -= 1
        return True

    def release(self, counter_id: str, month: str) -> None:
        """Give back one reserved unit (its request was refused): the next reservation here
        uses it."""
        pool = self._pools.setdefault(counter_id, _Pool(month, None))
        pool.left += 1

    async def give_back(self) -> None:
        """Return every unused unit to the shared counters (the replica stops). Units the store
        does not take back now stay counted: an account may be refused early, never late."""
        for counter_id in list(self._pools):
            try:
                await self._give_back(counter_id)
            except Exception as exc:
                log.warning("unused quota units not given back: %s", type(exc).__name__)

    async def _give_back_other_months(self, month: str) -> None:
        for counter_id, pool in list(self._pools.items()):
            if pool.month != month:
                await self._give_back(counter_id)

    async def _give_back(self, counter_id: str) -> None:
        # Concurrent requests may give the same pool back: the first takes it.
        pool = self._pools.pop(counter_id, None)
        if pool is not None and pool.left:
            await self._repo.release_usage(counter_id, pool.left)
