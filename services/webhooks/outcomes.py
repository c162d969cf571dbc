"""Attempts' outcomes, written in batches: one bulk write for every outcome that arrives while
the previous write is in flight (group commit), and one for the endpoints' health.

An attempt hands its outcome over and waits for the answer: whether it was recorded (its
lease still held). The first outcome starts a write at once, so a quiet system pays no delay;
under load each write carries every outcome that came in meanwhile, so the store sees a few
writes per batch of attempts instead of one per attempt. A failed write (the store down) fails
every attempt of its batch: they keep their leases and are taken up again when those expire.
"""

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from services.webhooks.endpoint_health import AttemptResult, EndpointHealth
from services.webhooks.repository import WebhookRepository

log = logging.getLogger(__name__)


@dataclass
class _Pending:
    delivery_id: str
    token: str
    changes: dict[str, Any]
    result: AttemptResult | None
    manual_at: datetime | None
    done: asyncio.Future[bool]


class OutcomeWriter:
    def __init__(
        self,
        repo: WebhookRepository,
        health: EndpointHealth,
        now: Callable[[], datetime],
    ):
        self._repo = repo
        self._health = health
        self._now = now
        self._queue: list[_Pending] = []
        self._writing: asyncio.Task[None] | None = None

    async def record(
        self,
        delivery_id: str,
        token: str,
        changes: dict[str, Any],
        result: AttemptResult | None = None,
        manual_at: datetime | None = None,
    ) -> bool:
        """Store the outcome under the claim's token; False when the lease was lost. `result`
        (None when nothing was sent) counts for or against the endpoint's health; `manual_at`
        is the manual request this attempt answered (cleared unless a newer one came)."""
        done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._queue.append(_Pending(delivery_id, token, changes, result, manual_at, done))
        if self._writing is None:
            self._writing = asyncio.create_task(self._write_all())
        return await done

    async def health(self, results: list[AttemptResult]) -> None:
        """Count attempts stored with their deliveries (sent before being stored) for or
        against their endpoints' health."""
        try:
            await self._health.record(results, self._now())
        except Exception:
            log.exception("recording the webhooks' health failed")

    async def _write_all(self) -> None:
        try:
            while self._queue:
                batch, self._queue = self._queue, []
                await self._write(batch)
        finally:
            self._writing = None

    async def _tell_missed(self, missed: list[str]) -> None:
        """Log why outcomes were not recorded: a delivery that still exists had its lease
        taken over (this replica stalled past it; the other may send the attempt again), one
        that is gone was deleted with its webhook meanwhile (nothing to tell an operator)."""
        try:
            existing = await self._repo.existing_deliveries(missed)
        except Exception:
            existing = set(missed)
        for delivery_id in missed:
            if delivery_id in existing:
                log.warning("delivery %s: outcome not recorded: its lease was lost", delivery_id)
            else:
                log.debug(
                    "delivery %s: outcome not recorded: deleted with its webhook", delivery_id
                )

    async def _write(self, batch: list[_Pending]) -> None:
        try:
            recorded = await self._repo.record_attempts(
                [(item.delivery_id, item.token, item.changes) for item in batch],
                {item.delivery_id: item.manual_at for item in batch if item.manual_at},
            )
        except Exception as exc:
            for item in batch:
                if not item.done.done():
                    item.done.set_exception(exc)
            return
        missed = [item.delivery_id for item in batch if item.delivery_id not in recorded]
        if missed:
            await self._tell_missed(missed)
        for item in batch:
            if not item.done.done():
                item.done.set_result(item.delivery_id in recorded)
        results = [item.result for item in batch if item.result and item.delivery_id in recorded]
        try:
            await self._health.record(results, self._now())
        except Exception:
            # Advisory (failing_since, auto-disable): a lost update only delays them.
            log.exception("recording the webhooks' health failed")
