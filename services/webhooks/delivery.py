"""Deliveries: made from events (fan-out), then attempted one at a time (spec 2.7, 3.5, 6.3).

Fan-out: for each enabled webhook of the event's account and mode subscribed to the event's
webhook type or to "*", one `pending` delivery whose body is fixed now. The consumer hands over
a batch of events: the webhooks of each account and mode in it are read with one query, and
every delivery of the batch is stored with one unordered insert. The unique
(webhook_id, event_id) index makes a redelivered event create nothing new. Whether a webhook is
enabled and what it subscribes to is read when the webhooks service processes the event
(normally milliseconds after it happened; nothing is cached): a webhook disabled then gets
nothing for the event, even once it is enabled again. A delivery already made keeps its
schedule when its webhook is disabled later; deleting the webhook deletes its deliveries, which
ends their retries.
"""

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any

from services.webhooks import payload
from services.webhooks.mapping import webhook_type
from services.webhooks.repository import WebhookRepository
from services.webhooks.retries import NextState, after_attempt, first_attempt_at
from services.webhooks.secretbox import SecretBox
from services.webhooks.sender import Outcome, Sender
from services.webhooks.signing import signature_headers
from shared.clock import Clock
from shared.ids import new_id
from shared.logs import account_id_var
from shared.messages import PassEventMessage
from shared.metrics import WEBHOOK_DELIVERIES
from shared.models import DeliveryRecord, WebhookRecord

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
    typed = [(event, kind) for event in events if (kind := _kind(event)) is not None]
    scopes: dict[tuple[str, str], set[str]] = {}
    for event, kind in typed:
        scopes.setdefault((event.account_id, event.mode), set()).add(kind)
    hooks: dict[tuple[str, str], list[WebhookRecord]] = {}
    for (account_id, mode), kinds in scopes.items():
        hooks[(account_id, mode)] = await repo.subscribed_to_any(account_id, mode, kinds)
    now = clock.now()
    records = [
        _delivery(event, kind, hook.id, now, delays)
        for event, kind in typed
        for hook in hooks[(event.account_id, event.mode)]
        if kind in hook.events or "*" in hook.events
    ]
    return await repo.insert_deliveries(records)


def _kind(event: PassEventMessage) -> str | None:
    return webhook_type(event.event_type, event.metadata)


def _delivery(
    event: PassEventMessage, kind: str, webhook_id: str, now: datetime, delays: list[float]
) -> DeliveryRecord:
    return DeliveryRecord.model_validate(
        {
            "_id": new_id("webhook_delivery"),
            "account_id": event.account_id,
            "mode": event.mode,
            "created_at": now,
            "webhook_id": webhook_id,
            "event_id": event.id,
            "event_type": kind,
            "payload": payload.body(event, kind),
            "next_attempt_at": first_attempt_at(now, delays),
        }
    )


class Deliverer:
    """One attempt of a claimed delivery: sign afresh, send, record the outcome."""

    def __init__(
        self,
        repo: WebhookRepository,
        box: SecretBox,
        sender: Sender,
        clock: Clock,
        delays: list[float],
    ):
        self._repo = repo
        self._box = box
        self._sender = sender
        self._clock = clock
        self._delays = delays

    async def attempt(
        self, delivery: DeliveryRecord, token: str, sent: Callable[[], None]
    ) -> NextState | None:
        """The delivery's state after this attempt; None when there was nothing to attempt
        (the webhook was deleted) or the outcome could not be recorded (the lease was lost)."""
        account_id_var.set(delivery.account_id)  # each attempt runs in its own task
        hook = await self._repo.by_id(delivery.webhook_id)
        if hook is None:
            return None
        started = self._clock.now()
        outcome = await self._send(delivery, hook.url, hook.secret_encrypted, started.timestamp())
        sent()
        attempts = delivery.attempts + 1
        state = after_attempt(attempts, self._delays, started, outcome.ok)
        changes: dict[str, Any] = {
            "status": state.status,
            "attempts": attempts,
            "last_attempt_at": started,
            "next_attempt_at": state.next_attempt_at,
            "response_status": outcome.response_status,
            "response_body": outcome.response_body,
        }
        recorded = await self._repo.record_attempt(delivery.id, token, changes)
        if recorded:
            WEBHOOK_DELIVERIES.labels(state.status).inc()
        log.info(
            "delivery %s to %s attempt %d: %s (%s)",
            delivery.id,
            delivery.webhook_id,
            attempts,
            state.status,
            outcome.response_status or "no response",
        )
        return state if recorded else None

    async def _send(self, delivery: DeliveryRecord, url: str, sealed: str, at: float) -> Outcome:
        try:
            secret = self._box.open(sealed)
        except ValueError:
            log.error("webhook %s: its secret cannot be decrypted", delivery.webhook_id)
            return Outcome(False, None, "not sent: the signing secret cannot be decrypted")
        headers = signature_headers(
            secret, delivery.id, delivery.event_type, int(at), delivery.payload
        )
        return await self._sender.send(url, delivery.payload, headers)
