"""Rate limits of Apple's pass web service (docs/wallet-callbacks.md#limits).

Fixed windows of `window_seconds`, counted in MongoDB (`WalletRateWindows`) so that they hold
across replicas: per client address on every endpoint of the web service, and per pass on the
three that name one in their path (register, unregister, latest pass). Both counters of a
request are taken in one round trip, before authentication, so a flood costs one write per
request rather than the reads that authenticate it. The pass is its pass type and serial number
as the path gives them: serial numbers are random UUIDs that only a pass's holders see, so a
stranger cannot spend another pass's allowance.

Google's callbacks are not limited here: Google sends them from shared addresses, and each one
is authenticated by its signature and nonce before anything is written.
"""

import hashlib
import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

from services.events.repository import WalletRateWindows
from shared.clock import Clock

# Counters outlive their window by this much, then MongoDB's TTL monitor removes them.
WINDOW_GRACE: Final = timedelta(minutes=5)


@dataclass(frozen=True)
class WalletLimits:
    """Requests allowed per window; 0 turns that limit off."""

    window_seconds: int
    per_pass: int
    per_address: int


class WalletRateLimiter:
    def __init__(self, windows: WalletRateWindows, limits: WalletLimits, clock: Clock):
        self._windows = windows
        self._limits = limits
        self._clock = clock

    async def retry_after(self, address: str | None, pass_key: tuple[str, str] | None) -> int:
        """Count one request from `address` (about the pass `pass_key`, its pass type and
        serial number); 0 when it is within the limits, else the seconds until its window
        ends (the request is refused with 429 and that Retry-After)."""
        now = self._clock.now()
        epoch = int(now.timestamp())
        start = epoch - epoch % self._limits.window_seconds
        counters = []
        if address and self._limits.per_address:
            counters.append((f"address:{_digest(address)}:{start}", self._limits.per_address))
        if pass_key is not None and self._limits.per_pass:
            counters.append((f"pass:{_digest(*pass_key)}:{start}", self._limits.per_pass))
        if not counters:
            return 0
        end = datetime.fromtimestamp(start + self._limits.window_seconds, UTC)
        if await self._windows.count(counters, end + WINDOW_GRACE):
            return 0
        return max(1, math.ceil((end - now).total_seconds()))


def _digest(*parts: str) -> str:
    # Paths and forwarded addresses can be long; ids stay short whatever the client sends.
    return hashlib.sha256("\n".join(parts).encode(errors="surrogatepass")).hexdigest()[:32]
