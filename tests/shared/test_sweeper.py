"""Periodic sweeps (shared/sweeper.py): a retention sweep runs at once when started, purging
what is older than its days by the clock, and again every period; a failed run is tried
again at the next one. (What each purge deletes: tests/webhooks/test_retention.py,
tests/issuer/jobs/test_retention.py.)"""

import asyncio
from datetime import UTC, datetime, timedelta

from shared.sweeper import retention_sweep
from tests.support.inproc_api import ManualClock

NOW = datetime(2026, 11, 28, 12, tzinfo=UTC)


async def test_a_retention_sweep_purges_at_start_and_every_period() -> None:
    cutoffs: list[datetime] = []
    third = asyncio.Event()

    async def purge(before: datetime) -> int:
        cutoffs.append(before)
        if len(cutoffs) == 2:
            raise RuntimeError("the store is away")  # logged; tried again next period
        if len(cutoffs) == 3:
            third.set()
        return 1

    sweep = retention_sweep("test-retention", purge, ManualClock(NOW), 90, 0.05, "purged %d")
    sweep.start()
    try:
        await asyncio.wait_for(third.wait(), 10)
    finally:
        await sweep.stop()
    assert cutoffs[0] == NOW - timedelta(days=90)
