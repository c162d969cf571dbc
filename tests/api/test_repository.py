"""The api's store at start: an index a release retired is dropped (each index costs every
write of its collection), and a start without it is fine."""

import secrets
from typing import Any

from services.api.repository import ApiRepository
from shared.mongo import create_client
from shared.redaction import REFS
from tests.support.database import recording_finds


async def test_the_lone_account_id_index_of_api_keys_is_dropped_at_start(mongo_url: str) -> None:
    client = create_client(mongo_url)
    db = client[f"t_{secrets.token_hex(6)}"]
    try:
        await db["api_keys"].create_index("account_id")  # what an older release made
        repo = ApiRepository(db)
        await repo.ensure_indexes()
        names = set(await db["api_keys"].index_information())
        assert "account_id_1" not in names
        assert "account_id_1__id_-1" in names  # serves every query the old one did
        await repo.ensure_indexes()  # a start without it
    finally:
        await client.drop_database(db.name)
        await client.close()


async def _answered(repo: ApiRepository, record_id: str, account_id: str, body: Any) -> None:
    claim = {"_id": record_id, "account_id": account_id, "mode": "test", REFS: []}
    assert await repo.claim_idempotency(claim) is None
    await repo.finish_idempotency(record_id, account_id, 200, body)


async def test_a_redaction_reads_only_the_stored_answers_that_hold_the_pass(
    mongo_url: str,
) -> None:
    """A redaction rewrites the idempotency records that hold the pass, found through their
    `refs` index: not by reading every record of the last 24 hours (every account's). Records
    stored before `refs` existed are still found, and only the account's are touched."""
    pass_ = {"id": "pass_mine", "object": "pass", "holder_name": "Ada"}
    unknown_code = {"id": "scan_1", "object": "scan", "pass_id": None, "code": "CODE-7"}
    async with recording_finds(mongo_url) as (client, finds):
        db = client[f"t_{secrets.token_hex(6)}"]
        repo = ApiRepository(db)
        await repo.ensure_indexes()
        try:
            for n in range(200):
                await _answered(repo, f"other{n}", "acct_a", {**pass_, "id": f"pass_{n}"})
            await _answered(repo, "mine", "acct_a", {"object": "list", "data": [{"pass": pass_}]})
            await _answered(repo, "scan", "acct_a", unknown_code)
            legacy = {"_id": "old", "account_id": "acct_a", "mode": "test", "response_body": pass_}
            elsewhere = {**legacy, "_id": "elsewhere", "account_id": "acct_b"}
            await db["idempotency_keys"].insert_many(
                [legacy, {**elsewhere, "response_body": unknown_code}]
            )
            finds.clear()

            erased = await repo.erase_pass_copies("acct_a", "test", "pass_mine", code="CODE-7")

            [query] = [found for name, found in finds if name == "idempotency_keys"]
            explained = await db["idempotency_keys"].find(query).explain()
            stored = {doc["_id"]: doc async for doc in db["idempotency_keys"].find()}
        finally:
            await client.drop_database(db.name)

    assert explained["executionStats"]["totalDocsExamined"] <= 4  # of 204
    assert erased == 3
    assert stored["mine"]["response_body"]["data"][0]["pass"]["holder_name"] is None
    assert stored["old"]["response_body"]["holder_name"] is None
    assert stored["scan"]["response_body"]["code"] is None
    assert stored["elsewhere"]["response_body"]["code"] == "CODE-7"  # another account's
    assert stored["other0"]["response_body"]["holder_name"] == "Ada"
