"""services/api/events_out.py on the real store: an event a holder's request observed is
recorded with the pass as it is when it is recorded, not as the request read it."""

from services.api.events_out import record_observed_event
from services.issuer.reads import IssuerReads
from shared.clock import SystemClock
from shared.mongo import Database
from shared.outbox import Outbox
from tests.support.outbox import outbox_messages
from tests.support.records import pass_record


async def test_a_download_that_ends_after_a_redaction_records_no_erased_data(
    db: Database,
) -> None:
    """A slow reader's download read the pass before its redaction and ends after it: its
    `downloaded` event (and so any webhook of it) carries none of the erased data."""
    read_by_request = pass_record(holder_name="Ada Lovelace", field_values={"seat": "A1"})
    redacted = read_by_request.model_copy(
        update={"holder_name": None, "field_values": {}, "voided": True, "version": 2}
    )
    await db["passes"].insert_one(redacted.model_dump(by_alias=True))
    outbox = Outbox(db, owner="api", name="api_outbox")

    await record_observed_event(
        outbox, SystemClock(), IssuerReads(db), read_by_request, "downloaded", {}
    )

    [message] = await outbox_messages(db["api_outbox"])
    assert "Ada Lovelace" not in str(message)
    assert "A1" not in str(message)
