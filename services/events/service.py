"""Recording lifecycle events exactly once, a consumer's batch at a time."""

import logging
from functools import partial

from services.events.repository import EventsRepository
from shared.messages import PassEventMessage
from shared.models import PassEventRecord
from shared.redaction import ErasureAgain, is_redaction

log = logging.getLogger(__name__)
# A redaction's events: erased again once older batches in flight are recorded.
_ERASE_AGAIN = ErasureAgain()


def event_record(event: PassEventMessage) -> PassEventRecord:
    return PassEventRecord.model_validate(
        {
            "_id": event.id,
            "account_id": event.account_id,
            "mode": event.mode,
            "pass_id": event.pass_id,
            "type": event.event_type,
            "metadata": event.metadata,
            "created_at": event.created_at,
        }
    )


async def record_events(repo: EventsRepository, events: list[PassEventMessage]) -> int:
    """Store a batch of events, each once (a redelivered one is skipped); how many were new."""
    stored = await repo.record_many([event_record(event) for event in events])
    if skipped := len(events) - stored:
        log.info("%d of %d events already recorded; redelivery ignored", skipped, len(events))
    # Also on a redelivery: the erasure may not have run before the crash that caused it.
    for event in events:
        if is_redaction(event.event_type, event.metadata):
            erase = partial(
                repo.erase_metadata, event.account_id, event.mode, event.pass_id, event.id
            )
            await erase()
            _ERASE_AGAIN.schedule(erase)
    return stored


async def record_event(repo: EventsRepository, event: PassEventMessage) -> bool:
    """One event; False when it was recorded before."""
    return await record_events(repo, [event]) == 1
