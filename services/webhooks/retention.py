"""Deliveries are kept `TESSERA_WEBHOOKS_DELIVERY_RETENTION_DAYS` (90) after their event once
they are over (docs/webhooks.md#retention): each carries the pass's snapshot, and a webhook
that is disabled, or receives every event, would grow its history without end."""

from datetime import timedelta

from services.webhooks.repository import WebhookRepository
from shared.clock import Clock
from shared.sweeper import PeriodicSweep

SWEEP_SECONDS = 3600.0


def delivery_retention(
    repo: WebhookRepository, clock: Clock, days: float, every_seconds: float = SWEEP_SECONDS
) -> PeriodicSweep:
    kept = timedelta(days=days)

    async def sweep() -> int:
        return await repo.purge_finished(clock.now() - kept)

    return PeriodicSweep(
        "webhook-delivery-retention", sweep, every_seconds, "deleted %d deliveries past retention"
    )
