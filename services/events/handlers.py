"""The events service's JetStream consumers, a fetched batch at a time (shared/event_batches.py):
the durable consumer of the events stream (record the batch with one insert, then acknowledge
its events) and the one of the live-updates work queue (push the passes' devices, publish their
events, then acknowledge)."""

import logging

from faststream.nats import NatsBroker

from services.events.push import LiveUpdates
from services.events.repository import EventsRepository
from services.events.service import record_events
from shared.event_batches import BatchConsumer, EventBatchConsumer
from shared.messages import (
    EVENTS_CONSUMER,
    LIVE_UPDATES_CONSUMER,
    LIVE_UPDATES_STREAM,
    LIVE_UPDATES_SUBJECT_PREFIX,
    LiveUpdate,
    PassEventMessage,
    live_update_adapter,
)

log = logging.getLogger(__name__)

# A live update that failed (MongoDB or the events stream unavailable) comes back after this
# long, not at once, so an outage is not a busy loop.
LIVE_UPDATE_RETRY_SECONDS = 2.0
# Fetchers of live updates per process (each with its share of the workers).
LIVE_UPDATE_FETCHERS = 2


def register(broker: NatsBroker, repo: EventsRepository) -> EventBatchConsumer:
    """The consumer that records events; a worker for the app's `running`."""

    async def record(events: list[PassEventMessage]) -> None:
        await record_events(repo, events)

    return EventBatchConsumer(broker, EVENTS_CONSUMER, record)


def register_live_updates(
    broker: NatsBroker, live_updates: LiveUpdates, workers: int
) -> list[BatchConsumer[LiveUpdate]]:
    """The workers that take live updates off the work queue a batch at a time (one read of
    the registrations, every push in flight at once, every event published, then each
    acknowledged), `workers` live updates in hand at most per process, split between
    `LIVE_UPDATE_FETCHERS` fetchers so that one batch waiting on a slow APNs answer does not
    hold up the next; the durable consumer is shared by every replica."""
    fetchers = min(LIVE_UPDATE_FETCHERS, workers)

    async def deliver(updates: list[LiveUpdate]) -> None:
        await live_updates.deliver_many(updates)

    return [
        BatchConsumer(
            broker,
            LIVE_UPDATES_CONSUMER,
            deliver,
            stream=LIVE_UPDATES_STREAM,
            subject=f"{LIVE_UPDATES_SUBJECT_PREFIX}.>",
            parse=live_update_adapter,
            batch_size=max(1, workers // fetchers),
            retry_seconds=LIVE_UPDATE_RETRY_SECONDS,
        )
        for _ in range(fetchers)
    ]
