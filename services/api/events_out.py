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
from shared.messages import PassEventType
from shared.models import PassRecord
from shared.pass_events import pass_event, publish_event

log = logging.getLogger(__name__)


async def publish_pass_event(
    broker: NatsBroker,
    clock: Clock,
    record: PassRecord,
    event_type: PassEventType,
    metadata: dict[str, Any] | None = None,
) -> None:
    try:
        await publish_event(broker, pass_event(record, event_type, metadata or {}, clock.now()))
    except Exception:
        log.exception("could not publish %s event of %s", event_type, record.id)
