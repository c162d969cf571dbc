"""Warns before the Apple signing identity stops working: a certificate that expires while the
issuer runs turns every pass it signs into one Wallet and `openssl cms -verify` reject.

The identity was valid at start (shared/apple_certificates.py refuses it otherwise). From 30
days before a certificate's end the watch logs a WARNING at start and once a day, and /readyz
names the certificate and its date in its `signing` detail while still answering 200; once a
certificate has expired, the line is an ERROR and /readyz answers 503 (docs/operations.md).
"""

import asyncio
import logging
from contextlib import suppress

from shared.apple_certificates import EXPIRY_WARNING, SigningIdentityError, expiries
from shared.apple_identity import SigningIdentity
from shared.clock import Clock, iso

log = logging.getLogger(__name__)
DAY_SECONDS = 86_400.0


class SigningExpiryWatch:
    def __init__(
        self, identity: SigningIdentity, clock: Clock, *, every_seconds: float = DAY_SECONDS
    ):
        self._expiries = expiries(identity.certificate, identity.intermediate)
        self._clock = clock
        self._every_seconds = every_seconds
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="signing-expiry-watch")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            self.log_notices()
            await asyncio.sleep(self._every_seconds)

    def log_notices(self) -> None:
        now = self._clock.now()
        for expiry in self._expiries:
            problem = expiry.problem(now)
            if problem is not None:
                log.error("signing identity: %s", problem)
            elif (warning := expiry.warning(now, EXPIRY_WARNING)) is not None:
                log.warning("signing identity: %s", warning)

    async def check(self) -> None:
        """The /readyz check: fails once a certificate is no longer valid."""
        now = self._clock.now()
        problems = [p for expiry in self._expiries if (p := expiry.problem(now)) is not None]
        if problems:
            raise SigningIdentityError("; ".join(problems))

    def detail(self) -> dict[str, object]:
        """The /readyz `signing` detail: each certificate's end, and the notices in force."""
        now = self._clock.now()
        problems = [p for expiry in self._expiries if (p := expiry.problem(now)) is not None]
        warnings = [
            w for expiry in self._expiries if (w := expiry.warning(now, EXPIRY_WARNING)) is not None
        ]
        return {
            "status": "invalid" if problems else "expiring" if warnings else "ok",
            "certificates": [
                {"role": expiry.role, "name": expiry.name, "not_after": iso(expiry.not_after)}
                for expiry in self._expiries
            ],
            "warnings": problems + warnings,
        }
