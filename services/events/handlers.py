"""The events service's durable JetStream consumer: record each event, then acknowledge."""

from faststream import AckPolicy
from faststream.nats import NatsBroker, NatsMessage, PullSub

from services.events.repository import EventsRepository
from services.events.service import record_event
from shared.messages import EVENTS_CONSUMER, EVENTS_SUBJECT_PREFIX, pass_event_adapter
from shared.nats import events_stream


def register(broker: NatsBroker, repo: EventsRepository) -> None:
    # NACK_ON_ERROR: a failed write (MongoDB down) is redelivered, never lost.
    @broker.subscriber(
        f"{EVENTS_SUBJECT_PREFIX}.>",
        stream=events_stream(),
        durable=EVENTS_CONSUMER,
        pull_sub=PullSub(batch_size=50, timeout=1.0),
        ack_policy=AckPolicy.NACK_ON_ERROR,
    )
    async def on_event(msg: NatsMessage) -> None:
        await record_event(repo, pass_event_adapter.validate_json(msg.body))
