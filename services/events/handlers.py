"""The events service's JetStream subscribers: the durable consumer of the events stream (record
each fetched batch with one insert, then acknowledge its events; shared/event_batches.py) and the
one of the live-updates work queue (push the pass's devices, publish its event, then
acknowledge)."""

import logging

from faststream import AckPolicy
from faststream.nats import JStream, NatsBroker, NatsMessage, PullSub
from pydantic import ValidationError

from services.events.push import LiveUpdates
from services.events.repository import EventsRepository
from services.events.service import record_events
from shared.event_batches import EventBatchConsumer
from shared.messages import (
    EVENTS_CONSUMER,
    LIVE_UPDATES_CONSUMER,
    LIVE_UPDATES_STREAM,
    LIVE_UPDATES_SUBJECT_PREFIX,
    PassEventMessage,
    live_update_adapter,
)

log = logging.getLogger(__name__)

# A live update that failed (MongoDB or the events stream unavailable) comes back after this
# long, not at once, so an outage is not a busy loop.
LIVE_UPDATE_RETRY_SECONDS = 2.0


def register(broker: NatsBroker, repo: EventsRepository) -> EventBatchConsumer:
    """The consumer that records events; a worker for the app's `running`."""

    async def record(events: list[PassEventMessage]) -> None:
        await record_events(repo, events)

    return EventBatchConsumer(broker, EVENTS_CONSUMER, record)


def register_live_updates(broker: NatsBroker, live_updates: LiveUpdates, workers: int) -> None:
    """Take live updates off the work queue, `workers` at once, so a slow APNs answer for one
    pass holds up no other; the durable consumer is shared by every replica."""

    @broker.subscriber(
        f"{LIVE_UPDATES_SUBJECT_PREFIX}.>",
        stream=JStream(LIVE_UPDATES_STREAM, declare=False),
        durable=LIVE_UPDATES_CONSUMER,
        pull_sub=PullSub(timeout=1.0),
        max_workers=workers,
        ack_policy=AckPolicy.MANUAL,
    )
    async def on_live_update(msg: NatsMessage) -> None:
        await deliver_live_update(live_updates, msg)


async def deliver_live_update(live_updates: LiveUpdates, msg: NatsMessage) -> None:
    """Acknowledge only once the event is published; a failure leaves the live update to be
    delivered again, a message that can never parse is rejected, loudly."""
    try:
        update = live_update_adapter.validate_json(msg.body)
    except ValidationError:
        log.error("dropping malformed live update %s", msg.message_id)
        await msg.reject()
        return
    try:
        await live_updates.deliver(update)
    except Exception:
        log.exception("live update of %s failed; it will be retried", update.event.pass_id)
        await msg.nack(delay=LIVE_UPDATE_RETRY_SECONDS)
        return
    await msg.ack()
