"""Making and publishing pass events: the one way every service puts an event on the stream.

The event id is the Nats-Msg-Id, so JetStream drops a re-send inside its duplicate window and
the events consumer drops it after (it records by id).
"""

from datetime import datetime
from typing import Any

from faststream.nats import NatsBroker

from shared.ids import new_id
from shared.messages import EVENTS_STREAM, PassEventMessage, PassEventType
from shared.models import PassRecord


def pass_event(
    record: PassRecord,
    event_type: PassEventType,
    metadata: dict[str, Any],
    at: datetime,
    event_id: str | None = None,
) -> PassEventMessage:
    """An event of `record` as it is now (its snapshot goes with the event)."""
    return PassEventMessage(
        id=event_id or new_id("pass_event"),
        account_id=record.account_id,
        mode=record.mode,
        pass_id=record.id,
        event_type=event_type,
        metadata=metadata,
        created_at=at,
        pass_snapshot=record.snapshot(),
    )


async def publish_event(broker: NatsBroker, event: PassEventMessage) -> None:
    """Publish to the events stream; raises unless JetStream acknowledged it."""
    await broker.publish(
        event.model_dump_json().encode(),
        event.subject,
        stream=EVENTS_STREAM,
        headers={"Nats-Msg-Id": event.id},
        timeout=5.0,
    )
