"""Pass events the api itself observes (page views, downloads, Google add intents).

They go straight to the events stream, like the issuer's, with the event id as Nats-Msg-Id.
There is no database write to pair them with, so no outbox: if NATS cannot take the event the
page is still served and the failure is logged (a holder must never lose their pass because
an analytics event could not be sent).
"""

import logging
from typing import Any

from faststream.nats import NatsBroker

from shared.clock import Clock
from shared.ids import new_id
from shared.messages import EVENTS_STREAM, PassEventMessage, PassEventType
from shared.models import PassRecord

log = logging.getLogger(__name__)


async def publish_pass_event(
    broker: NatsBroker,
    clock: Clock,
    record: PassRecord,
    event_type: PassEventType,
    metadata: dict[str, Any] | None = None,
) -> None:
    event = PassEventMessage(
        id=new_id("pass_event"),
        account_id=record.account_id,
        mode=record.mode,
        pass_id=record.id,
        event_type=event_type,
        metadata=metadata or {},
        created_at=clock.now(),
        pass_snapshot=record.snapshot(),
    )
    try:
        await broker.publish(
            event.model_dump_json().encode(),
            event.subject,
            stream=EVENTS_STREAM,
            headers={"Nats-Msg-Id": event.id},
            timeout=5.0,
        )
    except Exception:
        log.exception("could not publish %s event of %s", event_type, record.id)
