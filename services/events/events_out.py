"""Pass events the events service observes itself (Apple Wallet registrations, deliveries).

Published to the events stream like every other event (the event id is the Nats-Msg-Id), and
recorded by this service's own consumer from there, so webhooks see them too. `publish` raises
when JetStream does not acknowledge: the caller decides whether that undoes its write.
"""

from typing import Any

from faststream.nats import NatsBroker

from shared.clock import Clock
from shared.messages import PassEventMessage, PassEventType
from shared.models import PassRecord
from shared.pass_events import pass_event, publish_event


class EventPublisher:
    def __init__(self, broker: NatsBroker, clock: Clock):
        self._broker = broker
        self._clock = clock

    async def publish(
        self, record: PassRecord, event_type: PassEventType, metadata: dict[str, Any]
    ) -> PassEventMessage:
        event = pass_event(record, event_type, metadata, self._clock.now())
        await publish_event(self._broker, event)
        return event
