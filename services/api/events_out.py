"""Pass events the api itself observes (page views, downloads, Google add intents).

There is no write of the api's to pair them with: each is one insert into the api's own outbox,
`api_outbox` (shared/outbox.py), whose relay publishes it to the events stream like every
other event. If the store cannot take the event the page is still served and the failure is
logged (a holder must never lose their pass because an analytics event could not be recorded).
"""

import logging
from typing import Any

from services.issuer.reads import IssuerReads
from shared.clock import Clock
from shared.messages import PassEventType
from shared.models import PassRecord
from shared.outbox import Outbox
from shared.pass_events import pass_event

log = logging.getLogger(__name__)


async def record_pass_event(
    outbox: Outbox,
    clock: Clock,
    record: PassRecord,
    event_type: PassEventType,
    metadata: dict[str, Any] | None = None,
) -> None:
    event = pass_event(record, event_type, metadata or {}, clock.now())
    try:
        await outbox.add(event, event.created_at)
    except Exception:
        log.exception("could not record %s event of %s", event_type, record.id)


async def record_observed_event(
    outbox: Outbox,
    clock: Clock,
    reads: IssuerReads,
    record: PassRecord,
    event_type: PassEventType,
    metadata: dict[str, Any] | None = None,
) -> None:
    """Record what a holder's request observed of `record`, with the pass as it is now. The
    event is recorded once the response was sent, which for a slow reader of a download can
    be long after the request read the pass: a redaction may have erased the holder's data
    everywhere meanwhile, and the event must not bring it back (docs/privacy.md)."""
    try:
        current = await reads.pass_by_id(record.id)
    except Exception:
        log.exception("could not read pass %s to record its %s event", record.id, event_type)
        return
    await record_pass_event(outbox, clock, current or record, event_type, metadata)
