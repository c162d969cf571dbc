"""Deliveries: made from events (fan-out), then attempted one at a time (spec 2.7, 3.5, 6.3).

Fan-out: for each enabled webhook of the event's account and mode subscribed to the event's
webhook type or to "*", one `pending` delivery whose body is fixed now. The consumer hands over
a batch of events: the webhooks of each account and mode in it are read with one query, and
every delivery of the batch is stored with one unordered insert (services/webhooks/scheduler.py
`store_new`, which leases those it can attempt at once as it stores them). The unique
(webhook_id, event_id) index makes a redelivered event create nothing new. Whether a webhook is
enabled and what it subscribes to is read when the webhooks service processes the event
(normally milliseconds after it happened; nothing is cached): a webhook the account disabled
then gets nothing for the event, even once it is enabled again; one Tessera disabled for
failing gets a `dead` delivery, which `recover` can send later. Nothing is sent to a disabled
webhook: a delivery of it that comes due becomes `dead` without an attempt. Deleting the
webhook deletes its deliveries, which ends their retries.
"""

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from services.webhooks import payload
from services.webhooks.endpoint_health import AttemptResult
from services.webhooks.mapping import webhook_type
from services.webhooks.outcomes import OutcomeWriter
from services.webhooks.quiet_scopes import QuietScopes
from services.webhooks.repository import WebhookRepository
from services.webhooks.retries import NextState, after_attempt, first_attempt_at
from services.webhooks.rotation import live_secrets
from services.webhooks.secretbox import SecretBox
from services.webhooks.sender import Outcome, Sender
from services.webhooks.signing import signature_headers
from services.webhooks.throttle import Throttle
from shared.clock import Clock
from shared.ids import derived_id
from shared.logs import account_id_var
from shared.messages import PassEventMessage
from shared.metrics import WEBHOOK_DELIVERIES
from shared.models import DeliveryRecord, DeliveryStatus, WebhookRecord

log = logging.getLogger(__name__)


async def fan_out(
    repo: WebhookRepository, clock: Clock, delays: list[float], event: PassEventMessage
) -> list[DeliveryRecord]:
    """The deliveries this event created (none for a redelivered event)."""
    return await fan_out_batch(repo, clock, delays, [event])


async def fan_out_batch(
    repo: WebhookRepository, clock: Clock, delays: list[float], events: list[PassEventMessage]
) -> list[DeliveryRecord]:
    """The deliveries these events created (none for redelivered ones): one query per account
    and mode of the batch, one insert for all."""
    planned, _ = await plan_deliveries(repo, clock, delays, events)
    return await repo.insert_deliveries(planned)


async def plan_deliveries(
    repo: WebhookRepository,
    clock: Clock,
    delays: list[float],
    events: list[PassEventMessage],
    quiet: QuietScopes | None = None,
) -> tuple[list[DeliveryRecord], dict[str, WebhookRecord]]:
    """The deliveries these events make, not stored yet, and the webhooks they go to: one
    query per account and mode of the batch, none for a scope `quiet` knows has no webhook.
    A webhook disabled because it kept failing gets its deliveries too, made `dead` at once,
    so that `recover` sends them once it is enabled again (docs/webhooks.md#auto-disable)."""
    typed = [(event, kind) for event in events if (kind := _kind(event)) is not None]
    hooks: dict[tuple[str, str], list[WebhookRecord]] = {}
    for account_id, mode in {(event.account_id, event.mode) for event, _ in typed}:
        if quiet is None:
            hooks[(account_id, mode)] = await repo.deliverable(account_id, mode)
        else:
            hooks[(account_id, mode)] = await quiet.webhooks(repo, account_id, mode)
    now = clock.now()
    records = [
        _delivery(event, kind, hook, now, delays)
        for event, kind in typed
        for hook in hooks[(event.account_id, event.mode)]
        if kind in hook.events or "*" in hook.events
    ]
    by_id = {hook.id: hook for scoped in hooks.values() for hook in scoped}
    return records, by_id


def _kind(event: PassEventMessage) -> str | None:
    return webhook_type(event.event_type, event.metadata)


def _delivery(
    event: PassEventMessage, kind: str, hook: WebhookRecord, now: datetime, delays: list[float]
) -> DeliveryRecord:
    missed = not hook.enabled  # disabled for failing: recorded, not sent
    return DeliveryRecord.model_validate(
        {
            # The same id whenever this event is fanned out to this webhook again (a redelivery
            # after a crash that came between sending and storing): receivers dedupe on it.
            "_id": derived_id(
                "webhook_delivery",
                int(event.created_at.timestamp() * 1000),
                f"{hook.id}:{event.id}",
            ),
            "account_id": event.account_id,
            "mode": event.mode,
            "created_at": now,
            "webhook_id": hook.id,
            "event_id": event.id,
            "event_type": kind,
            "pass_id": event.pass_id,
            "payload": payload.body(event, kind),
            "status": "dead" if missed else "pending",
            "next_attempt_at": None if missed else first_attempt_at(now, delays),
        }
    )


@dataclass(frozen=True)
class Attempted:
    """A sent attempt, not yet recorded: the delivery's next state and the fields to store."""

    state: NextState
    changes: dict[str, Any]
    result: AttemptResult


def note(delivery: DeliveryRecord, attempted: Attempted) -> None:
    """Count and log an attempt whose outcome was stored."""
    WEBHOOK_DELIVERIES.labels(attempted.state.status).inc()
    log.info(
        "delivery %s to %s attempt %d (%s): %s (%s)",
        delivery.id,
        delivery.webhook_id,
        attempted.changes["attempts"],
        attempted.changes["trigger"],
        attempted.state.status,
        attempted.changes["response_status"] or "no response",
    )


class Deliverer:
    """One attempt of a claimed delivery: sign afresh, send, hand the outcome to the writer.

    Before sending: nothing is sent to a deleted webhook (its deliveries went with it), nor to
    a disabled one (the delivery becomes `dead` without an attempt, so that `recover` can send
    it once the webhook is enabled again); a webhook paused by a Retry-After or at its
    `max_deliveries_per_second` postpones the delivery to when it may send, not counted as an
    attempt. A manual attempt (resend, recover: `manual_at` set) is recorded with
    `trigger: "manual"`; if it fails, a delivered or dead delivery stays so, and a pending or
    failed one goes on with its schedule.
    """

    def __init__(
        self,
        repo: WebhookRepository,
        box: SecretBox,
        sender: Sender,
        clock: Clock,
        delays: list[float],
        outcomes: OutcomeWriter,
        throttle: Throttle,
    ):
        self._repo = repo
        self._box = box
        self._sender = sender
        self._clock = clock
        self._delays = delays
        self._outcomes = outcomes
        self._throttle = throttle

    async def attempt(
        self,
        delivery: DeliveryRecord,
        hook: WebhookRecord | None,
        token: str,
        sent: Callable[[], None],
    ) -> NextState | None:
        """The delivery's state after this attempt; None when there was nothing to attempt
        (the webhook was deleted) or the outcome could not be recorded (the lease was lost)."""
        account_id_var.set(delivery.account_id)  # each attempt runs in its own task
        if hook is None:
            # Stored by a fan-out that read the webhook just before its delete (which removed
            # the deliveries there were then): removed now, or claimed again at every lease.
            await self._repo.forget(delivery.id, token)
            return None
        now = self._clock.now()
        manual = delivery.manual_at is not None
        if not hook.enabled:
            sent()
            return await self._not_sent(delivery, token)
        wait_until = _paused_until(hook, now) or await self._throttle.take(hook, now)
        if wait_until is not None:
            sent()
            await self._repo.postpone(delivery.id, token, wait_until, manual=manual)
            return NextState(delivery.status, wait_until, held_back=True)
        attempted = await self.send(delivery, hook, now, sent)
        return await self.record(delivery, token, attempted)

    def sends_at_once(self, hook: WebhookRecord, now: datetime) -> bool:
        """Whether an attempt to this webhook may go out with no check in the store first:
        enabled, not paused, no rate to keep (services/webhooks/scheduler.py sends new
        deliveries to such webhooks before storing them)."""
        return (
            hook.enabled and _paused_until(hook, now) is None and not hook.max_deliveries_per_second
        )

    async def send(
        self,
        delivery: DeliveryRecord,
        hook: WebhookRecord,
        now: datetime,
        sent: Callable[[], None],
        *,
        fresh: bool = False,
    ) -> Attempted:
        """Sign and send one attempt started `now`; nothing is written. `fresh`: `hook` was
        read from the store for this attempt's event batch (not a cached copy), so its failure
        streak is known."""
        manual = delivery.manual_at is not None
        outcome = await self._send(delivery, hook, now)
        sent()
        attempts = delivery.attempts + 1
        state = self._state_after(delivery, manual, attempts, now, outcome.ok)
        changes: dict[str, Any] = {
            "status": state.status,
            "attempts": attempts,
            "last_attempt_at": now,
            "next_attempt_at": state.next_attempt_at,
            "response_status": outcome.response_status,
            "response_body": outcome.response_body,
            "trigger": "manual" if manual else "scheduled",
        }
        pause = self._pause(outcome, state, now)
        state = replace(state, paused_until=pause)
        # A success ends a streak; with a fresh record that shows none, there is none to end
        # (docs/webhooks.md#auto-disable).
        no_streak = fresh and hook.failing_since is None and hook.consecutive_failures == 0
        result = AttemptResult(hook.id, outcome.ok, now, pause, streak_known_clear=no_streak)
        return Attempted(state, changes, result)

    async def record(
        self, delivery: DeliveryRecord, token: str, attempted: Attempted
    ) -> NextState | None:
        """Write a sent attempt's outcome under the claim's token; None if the lease was lost."""
        recorded = await self._outcomes.record(
            delivery.id, token, attempted.changes, attempted.result, delivery.manual_at
        )
        if recorded:
            note(delivery, attempted)
        return attempted.state if recorded else None

    async def stored(self, sent: list[tuple[DeliveryRecord, Attempted]]) -> None:
        """Deliveries stored with the outcome of a first attempt sent before they were stored:
        counted, logged, and their endpoints' health recorded."""
        for delivery, attempted in sent:
            note(delivery, attempted)
        await self._outcomes.health([attempted.result for _, attempted in sent])

    def _state_after(
        self, delivery: DeliveryRecord, manual: bool, attempts: int, at: datetime, ok: bool
    ) -> NextState:
        if manual and not ok and delivery.status in ("delivered", "dead"):
            return NextState(delivery.status, None)
        return after_attempt(attempts, self._delays, at, ok)

    def _pause(self, outcome: Outcome, state: NextState, now: datetime) -> datetime | None:
        """Until when a Retry-After holds the endpoint back: the header's wait, at most until
        this delivery's next scheduled attempt (the schedule's longest wait if it has none)."""
        if outcome.retry_after is None:
            return None
        cap = (state.next_attempt_at or now + timedelta(seconds=max(self._delays))) - now
        # Compared in seconds first: a huge Retry-After (the receiver's to choose) would
        # overflow the date and lose the attempt's outcome.
        if outcome.retry_after >= cap.total_seconds():
            return now + cap
        return now + timedelta(seconds=outcome.retry_after)

    async def _not_sent(self, delivery: DeliveryRecord, token: str) -> NextState | None:
        """The webhook is disabled: nothing is sent; a due delivery becomes dead, without an
        attempt (a manual attempt asked of a delivered one leaves it delivered)."""
        status: DeliveryStatus = "delivered" if delivery.status == "delivered" else "dead"
        changes: dict[str, Any] = {"status": status, "next_attempt_at": None}
        recorded = await self._outcomes.record(
            delivery.id, token, changes, manual_at=delivery.manual_at
        )
        log.info("delivery %s not sent: webhook %s is disabled", delivery.id, delivery.webhook_id)
        return NextState(status, None) if recorded else None

    async def _send(self, delivery: DeliveryRecord, hook: WebhookRecord, at: datetime) -> Outcome:
        try:
            secrets = live_secrets(hook, self._box, at)
        except ValueError:
            log.error("webhook %s: its secret cannot be decrypted", delivery.webhook_id)
            return Outcome(False, None, "not sent: the signing secret cannot be decrypted")
        headers = signature_headers(
            secrets, delivery.id, delivery.event_type, int(at.timestamp()), delivery.payload
        )
        return await self._sender.send(hook.url, delivery.payload, headers)


def _paused_until(hook: WebhookRecord, now: datetime) -> datetime | None:
    return hook.paused_until if hook.paused_until is not None and hook.paused_until > now else None
