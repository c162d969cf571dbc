"""Finished jobs are kept `TESSERA_ISSUER_JOB_RETENTION_DAYS` (90) after they finished, then
deleted with their chunks (docs/api-decisions.md#jobs): a chunk keeps its rows' outcomes (the
results), and every design change adds a rollout job with a chunk per 100 passes."""

from datetime import timedelta

from services.issuer.jobs.store import JobStore
from shared.clock import Clock
from shared.sweeper import PeriodicSweep

SWEEP_SECONDS = 3600.0


def job_retention(
    store: JobStore, clock: Clock, days: float, every_seconds: float = SWEEP_SECONDS
) -> PeriodicSweep:
    kept = timedelta(days=days)

    async def sweep() -> int:
        return await store.purge_finished(clock.now() - kept)

    return PeriodicSweep("job-retention", sweep, every_seconds, "deleted %d jobs past retention")
