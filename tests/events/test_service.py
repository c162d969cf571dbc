"""Recording is exactly-once: a redelivered event is stored a single time."""

import secrets
from datetime import UTC, datetime

from services.events.reads import EventReads
from services.events.repository import EventsRepository
from services.events.service import record_event
from shared.ids import new_id
from shared.messages import PassEventMessage
from shared.models import PassSnapshot
from shared.mongo import create_client
from shared.pagination import PageRequest


async def test_a_redelivered_event_is_recorded_once(mongo_url: str) -> None:
    client = create_client(mongo_url)
    db = client[f"t_{secrets.token_hex(6)}"]
    repo = EventsRepository(db)
    await repo.ensure_indexes()
    pass_id = new_id("pass")
    event = PassEventMessage(
        id=new_id("pass_event"),
        account_id="acct_x",
        mode="test",
        pass_id=pass_id,
        event_type="created",
        created_at=datetime.now(UTC),
        pass_snapshot=PassSnapshot(
            id=pass_id,
            short_id="abc",
            mode="test",
            holder_email=None,
            holder_name=None,
            field_values={},
            voided=False,
        ),
    )
    try:
        assert await record_event(repo, event) is True
        assert await record_event(repo, event) is False
        page = await EventReads(db).page("acct_x", "test", PageRequest(limit=10))
        assert [recorded.id for recorded in page.items] == [event.id]
    finally:
        await client.drop_database(db.name)
        await client.close()
