"""The webhooks service's durable consumer of the events stream.

Delivery is a later issue; for now every event is parsed, counted and acknowledged, so the
consumer exists, keeps its position and never falls behind.
"""

import logging

from faststream import AckPolicy
from faststream.nats import NatsBroker, NatsMessage, PullSub

from shared.messages import EVENTS_SUBJECT_PREFIX, WEBHOOKS_CONSUMER, pass_event_adapter
from shared.nats import events_stream

log = logging.getLogger(__name__)


def register(broker: NatsBroker) -> None:
    @broker.subscriber(
        f"{EVENTS_SUBJECT_PREFIX}.>",
        stream=events_stream(),
        durable=WEBHOOKS_CONSUMER,
        pull_sub=PullSub(batch_size=50, timeout=1.0),
        ack_policy=AckPolicy.NACK_ON_ERROR,
    )
    async def on_event(msg: NatsMessage) -> None:
        event = pass_event_adapter.validate_json(msg.body)
        log.debug("event %s (%s) consumed", event.id, event.event_type)
