"""Pass events the events service observes itself (Apple Wallet registrations, deliveries).

Published to the events stream like every other event (the event id is the Nats-Msg-Id), and
recorded by this service's own consumer from there, so webhooks see them too. `publish` raises
when JetStream does not acknowledge: the caller decides whether that undoes its write.
"""

from typing import Any

from faststream.nats import NatsBroker

from shared.clock import Clock
from shared.ids import new_id
from shared.messages import EVENTS_STREAM, PassEventMessage, PassEventType
from shared.models import PassRecord


class EventPublisher:
    def __init__(self, broker: NatsBroker, clock: Clock):
        self._broker = broker
        self._clock = clock

    async def publish(
        self, record: PassRecord, event_type: PassEventType, metadata: dict[str, Any]
    ) -> PassEventMessage:
        event = PassEventMessage(
            id=new_id("pass_event"),
            account_id=record.account_id,
            mode=record.mode,
            pass_id=record.id,
            event_type=event_type,
            metadata=metadata,
            created_at=self._clock.now(),
            pass_snapshot=record.snapshot(),
        )
        await self._broker.publish(
            event.model_dump_json().encode(),
            event.subject,
            stream=EVENTS_STREAM,
            headers={"Nats-Msg-Id": event.id},
            timeout=5.0,
        )
        return event
