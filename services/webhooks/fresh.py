"""Webhook records fresh enough for an attempt about to start.

A delivery carries a copy of its webhook from the moment it was claimed (or its event fanned
out), and may then wait minutes for a sending slot behind a slow endpoint. Its attempt must
not use a copy that old: a rotation with no grace period, a new URL, a disable or a delete
apply to every attempt that starts after them (docs/webhooks.md#changes-reach-waiting-deliveries).
So an attempt that waited re-reads its webhook, and the attempts of one webhook that get their
slots at about the same time share that read: a read that started at most `max_age` seconds
ago serves them all, so a webhook costs at most one read per `max_age` per replica, however
many of its deliveries wait.
"""

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable

from shared.models import WebhookRecord

ReadWebhooks = Callable[[set[str]], Awaitable[dict[str, WebhookRecord]]]


class FreshWebhooks:
    def __init__(
        self,
        read: ReadWebhooks,
        max_age: float,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self._read = read
        self._max_age = max_age
        self._now = now
        # Each webhook's latest read (when it started, the read), oldest first.
        self._reads: OrderedDict[str, tuple[float, asyncio.Task[WebhookRecord | None]]] = (
            OrderedDict()
        )

    async def get(self, webhook_id: str) -> WebhookRecord | None:
        """The webhook as a read started at most `max_age` seconds ago found it (None:
        deleted). A failed read fails every attempt that shared it, and is not reused."""
        now = self._now()
        self._forget_older_than(now - self._max_age)
        latest = self._reads.get(webhook_id)
        if latest is None:
            reading = asyncio.get_running_loop().create_task(self._read_one(webhook_id))
            latest = self._reads[webhook_id] = (now, reading)
        try:
            return await asyncio.shield(latest[1])
        except Exception:
            if self._reads.get(webhook_id) is latest:
                del self._reads[webhook_id]
            raise

    async def _read_one(self, webhook_id: str) -> WebhookRecord | None:
        return (await self._read({webhook_id})).get(webhook_id)

    def _forget_older_than(self, cutoff: float) -> None:
        while self._reads:
            started, _ = next(iter(self._reads.values()))
            if started >= cutoff:
                return
            self._reads.popitem(last=False)
