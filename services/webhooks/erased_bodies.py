"""Delivery bodies a redaction erased while their deliveries waited for a sending slot.

A claimed delivery carries the body read with its claim, and may then wait minutes behind a
slow endpoint. A redaction meanwhile erases the pass's personal data from the stored body
(docs/privacy.md), marking the delivery `erased_at`, so an attempt that waited sends the body as
the erasure left it. Reading every waiting delivery's body again before its attempt would hold
its sending slot for a round trip (at capacity, a sixth of the throughput was left); instead
each replica asks, every `every` seconds while deliveries wait, for the deliveries erased since
its last look (one indexed query, empty but for the moments after a redaction), and keeps their
bodies until their attempts are made. An erasure reaches every attempt that starts more than
about `every` seconds after it.
"""

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection
from datetime import datetime, timedelta

log = logging.getLogger(__name__)

ReadErased = Callable[[datetime], Awaitable[dict[str, str]]]
# The replicas' clocks stamp `erased_at`: each look goes back this much further than the last.
CLOCK_MARGIN = timedelta(seconds=5)


class ErasedBodies:
    def __init__(self, read_erased: ReadErased, now: Callable[[], datetime]) -> None:
        self._read_erased = read_erased
        self._now = now
        self._since = now()
        self._bodies: dict[str, str] = {}

    def body_of(self, delivery_id: str) -> str | None:
        """The delivery's body as an erasure since its claim left it; None if none erased it."""
        return self._bodies.get(delivery_id)

    async def look(self, held: Collection[str]) -> None:
        """Take the bodies erased since the last look, keeping those of the deliveries `held`
        (waiting or being attempted here)."""
        looked_at = self._now()
        found = await self._read_erased(self._since - CLOCK_MARGIN)
        self._bodies = {
            delivery_id: body
            for delivery_id, body in {**self._bodies, **found}.items()
            if delivery_id in held
        }
        self._since = looked_at

    async def watch(self, held: Callable[[], Collection[str]], every: float) -> None:
        """Look every `every` seconds while deliveries are held (until cancelled)."""
        while True:
            await asyncio.sleep(every)
            if not (now_held := held()):
                continue
            try:
                await self.look(now_held)
            except Exception:
                log.exception("reading the deliveries a redaction erased failed")
