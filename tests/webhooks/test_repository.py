"""The webhooks service's store: deliveries stored before they carried `pass_id` get it once at
a start, so a redaction finds every delivery of its pass by that index, not by a regex over
every body of the collection (which ran inline in the fan-out)."""

import json

import pytest

from services.webhooks import repository
from services.webhooks.repository import WebhookRepository
from shared.ids import new_id
from tests.webhooks.records import delivery


def _legacy(pass_id: str, holder: str) -> dict[str, object]:
    body = {"type": "pass.issued", "data": {"pass": {"id": pass_id, "holder_name": holder}}}
    doc = delivery(pass_id=pass_id, payload=json.dumps(body)).to_document()
    doc.pop("pass_id", None)  # as stored before the field existed
    return doc


async def test_deliveries_without_a_pass_id_get_theirs_once_and_redaction_finds_them(
    repo: WebhookRepository, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(repository, "BACKFILL_BATCH", 1)  # written as it reads, batch by batch
    mine, other = new_id("pass"), new_id("pass")
    await repo.deliveries.insert_many([_legacy(mine, "Ann Holder"), _legacy(other, "Bo Other")])

    assert await repo.backfill_pass_ids_once() == 2
    assert await repo.backfill_pass_ids_once() == 0  # recorded: later starts read nothing else
    assert await repo.deliveries.count_documents({"pass_id": {"$exists": False}}) == 0

    assert await repo.erase_pass_copies("acct_a", "test", mine, kept_event_id="none") == 1
    bodies = [doc["payload"] async for doc in repo.deliveries.find({}, {"payload": 1})]
    assert not any("Ann Holder" in body for body in bodies)
    assert any("Bo Other" in body for body in bodies)
