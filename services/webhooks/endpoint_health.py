"""Each webhook's health from its attempts: failing since when, failures in a row, a pause
asked for by Retry-After, and the auto-disable (docs/webhooks.md#auto-disable).

A batch of recorded outcomes (services/webhooks/outcomes.py) updates the webhooks with one bulk
write, with atomic operators only, so replicas that record at once never undo each other's
counts: a success resets `failing_since` and `consecutive_failures` (a write only when they are
set; none at all when the batch's record of the webhook, read for its first attempts, showed
them clear and nothing in the batch failed), failures add to the count and set
`failing_since` if it is unset. Only when a batch has failures are those webhooks read back:
one that just started failing gets a warning line, and every enabled one failing for
`disable_after` or longer is disabled (`enabled: false`, `disabled_reason: "failing"`,
`disabled_at`) with a warning line of its own.
"""

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pymongo import UpdateOne

from services.webhooks.repository import WebhookRepository

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AttemptResult:
    """What one sent attempt says about its endpoint."""

    webhook_id: str
    ok: bool
    at: datetime
    # Retry-After of a 429 or 503, clamped: nothing more is sent to the endpoint before this.
    paused_until: datetime | None = None
    # The webhook's record, read for this attempt, showed no failure streak: a success has
    # nothing to reset (saves a write per batch to a healthy endpoint).
    streak_known_clear: bool = False


@dataclass
class _Tally:
    succeeded: bool = False  # the batch has a success: it ended any streak before it
    # Every success of the batch was to a webhook read with no streak, and none failed.
    known_clear: bool = True
    failures: int = 0  # failures after the batch's last success
    first_failure: datetime | None = None  # the first of those
    paused_until: datetime | None = None


class EndpointHealth:
    def __init__(self, repo: WebhookRepository, disable_after: timedelta):
        self._repo = repo
        self._disable_after = disable_after

    async def record(self, results: list[AttemptResult], now: datetime) -> None:
        tallies = _tally(results)
        if not tallies:
            return
        writes = [write for hook_id, tally in tallies.items() for write in _writes(hook_id, tally)]
        if writes:
            # Ordered: a success's reset comes before the failures that followed it.
            await self._repo.webhooks.bulk_write(writes, ordered=True)
        failing = {hook_id: t.first_failure for hook_id, t in tallies.items() if t.failures}
        if failing:
            await self._warn_and_disable(failing, now)

    async def _warn_and_disable(self, failing: dict[str, datetime | None], now: datetime) -> None:
        webhooks = self._repo.webhooks
        cursor = webhooks.find(
            {"_id": {"$in": sorted(failing)}},
            {"account_id": 1, "enabled": 1, "failing_since": 1, "consecutive_failures": 1},
        )
        cutoff = now - self._disable_after
        to_disable: list[str] = []
        async for doc in cursor:
            since = doc.get("failing_since")
            if since is None or not doc.get("enabled", True):
                continue
            if since == _millis(failing[doc["_id"]]):
                log.warning(
                    "webhook %s of account %s started failing at %s: it is disabled if every "
                    "attempt fails until %s",
                    doc["_id"],
                    doc["account_id"],
                    since.isoformat(),
                    (since + self._disable_after).isoformat(),
                )
            if since <= cutoff:
                to_disable.append(doc["_id"])
        if not to_disable:
            return
        await webhooks.update_many(
            {"_id": {"$in": to_disable}, "enabled": True, "failing_since": {"$lte": cutoff}},
            {"$set": {"enabled": False, "disabled_reason": "failing", "disabled_at": now}},
        )
        for hook_id in to_disable:
            log.warning(
                "webhook %s disabled: every attempt failed for %s (failing_since older than "
                "%s); PATCH enabled true to enable it again, then recover what it missed",
                hook_id,
                self._disable_after,
                cutoff.isoformat(),
            )


def _millis(moment: datetime | None) -> datetime | None:
    """As the store keeps it (BSON dates have milliseconds), to compare with what it stored."""
    return None if moment is None else moment.replace(microsecond=moment.microsecond // 1000 * 1000)


def _tally(results: list[AttemptResult]) -> dict[str, _Tally]:
    tallies: dict[str, _Tally] = {}
    for result in sorted(results, key=lambda r: r.at):
        tally = tallies.setdefault(result.webhook_id, _Tally())
        tally.known_clear = tally.known_clear and result.ok and result.streak_known_clear
        if result.ok:
            tally.succeeded, tally.failures, tally.first_failure = True, 0, None
        else:
            tally.failures += 1
            tally.first_failure = tally.first_failure or result.at
        if result.paused_until is not None:
            tally.paused_until = max(tally.paused_until or result.paused_until, result.paused_until)
    return tallies


def _writes(hook_id: str, tally: _Tally) -> list[UpdateOne]:
    writes: list[UpdateOne] = []
    if tally.succeeded and not tally.known_clear:
        # A success ends the streak; written only when there is one to end.
        set_: dict[str, Any] = {"failing_since": None, "consecutive_failures": 0}
        streak = {"$or": [{"failing_since": {"$ne": None}}, {"consecutive_failures": {"$ne": 0}}]}
        writes.append(UpdateOne({"_id": hook_id, **streak}, {"$set": set_}))
    if tally.failures:
        count = {"$inc": {"consecutive_failures": tally.failures}}
        writes.append(UpdateOne({"_id": hook_id}, count))
        writes.append(
            UpdateOne(
                {"_id": hook_id, "failing_since": None},
                {"$set": {"failing_since": tally.first_failure}},
            )
        )
    if tally.paused_until is not None:
        writes.append(UpdateOne({"_id": hook_id}, {"$max": {"paused_until": tally.paused_until}}))
    return writes
