"""Recording lifecycle events exactly once."""

import logging

from services.events.repository import EventsRepository
from shared.messages import PassEventMessage
from shared.models import PassEventRecord

log = logging.getLogger(__name__)


async def record_event(repo: EventsRepository, event: PassEventMessage) -> bool:
    record = PassEventRecord.model_validate(
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
    stored = await repo.record(record)
    if not stored:
        log.info("event %s already recorded; redelivery ignored", event.id)
    return stored
