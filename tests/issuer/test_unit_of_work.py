"""UnitOfWork.replace_passes against the real store: many passes changed, each only at the
version it was read at, whether the pass changed before the unit of work read it (refused at
once) or after (a write conflict of the transaction); nothing of a refused unit is written;
only the fields that changed are written."""

from datetime import UTC, datetime

import pytest
from pymongo.errors import PyMongoError

from services.issuer.repository import ConcurrentUpdate, IssuerRepository, pass_changes_since
from shared.models import PassRecord
from shared.mongo import is_write_conflict
from shared.redaction import REFS
from tests.support.database import recording_finds
from tests.support.records import pass_record


async def _stored(repo: IssuerRepository, count: int) -> list[PassRecord]:
    records = [
        pass_record(_id=f"pass_uow{n}", short_id=f"uow{n:013d}", serial_number=f"uow-{n}")
        for n in range(count)
    ]
    await repo.passes.insert_many([record.to_document() for record in records])
    return records


def _renamed(record: PassRecord, name: str) -> PassRecord:
    return record.model_copy(update={"holder_name": name, "version": record.version + 1})


async def _names(repo: IssuerRepository) -> list[str]:
    docs = await repo.passes.find({}, {"holder_name": 1}).sort("_id").to_list()
    return [doc["holder_name"] for doc in docs]


async def test_passes_at_the_version_read_are_replaced(repo: IssuerRepository) -> None:
    records = await _stored(repo, 3)
    async with repo.unit_of_work() as uow:
        await uow.replace_passes([(r, _renamed(r, "New")) for r in records])
    assert await _names(repo) == ["New"] * 3
    versions = {doc["version"] async for doc in repo.passes.find({})}
    assert versions == {records[0].version + 1}


async def test_a_pass_changed_before_the_read_refuses_the_whole_unit(
    repo: IssuerRepository,
) -> None:
    records = await _stored(repo, 3)
    await repo.passes.update_one({"_id": records[1].id}, {"$inc": {"version": 1}})
    with pytest.raises(ConcurrentUpdate):
        async with repo.unit_of_work() as uow:
            await uow.replace_passes([(r, _renamed(r, "New")) for r in records])
    assert await _names(repo) == ["Ada Lovelace"] * 3


async def test_a_pass_changed_after_the_read_is_a_write_conflict(repo: IssuerRepository) -> None:
    """The versions matched when read; another write commits before this unit's update: the
    store refuses the update (snapshot isolation), and the caller runs the unit again."""
    records = await _stored(repo, 3)

    async def replace_while_patched() -> None:
        async with repo.unit_of_work() as uow:
            await uow.replace_passes([(r, _renamed(r, "New")) for r in records])
            # Committed by someone else between this unit's read and its writes.
            patch = {"$set": {"holder_name": "PATCHed"}, "$inc": {"version": 1}}
            await repo.passes.update_one({"_id": records[2].id}, patch)

    with pytest.raises(PyMongoError) as refused:
        await replace_while_patched()
    assert is_write_conflict(refused.value)
    assert await _names(repo) == ["Ada Lovelace", "Ada Lovelace", "PATCHed"]


async def test_only_the_fields_that_changed_are_written(repo: IssuerRepository) -> None:
    """What the unit writes is what changed since the read; a field written meanwhile outside
    any version change (a scan's counters, the Google step's state) is not written over."""
    [record] = await _stored(repo, 1)
    await repo.passes.update_one({"_id": record.id}, {"$set": {"google_error": "later"}})
    changes = pass_changes_since(record, _renamed(record, "New"))
    assert changes == {"$set": {"holder_name": "New", "version": record.version + 1}}
    async with repo.unit_of_work() as uow:
        await uow.replace_passes([(record, _renamed(record, "New"))])
    stored = await repo.passes.find_one({"_id": record.id})
    assert stored is not None
    assert (stored["holder_name"], stored["google_error"]) == ("New", "later")


async def test_a_due_time_cleared_is_unset_not_stored_null(repo: IssuerRepository) -> None:
    """`google_sync_due` absent when None: its index is sparse (a null puts the pass in it)."""
    [record] = await _stored(repo, 1)
    due = record.model_copy(update={"google_sync_due": record.updated_at, "version": 2})
    assert pass_changes_since(record, due)["$set"]["google_sync_due"] == record.updated_at
    cleared = due.model_copy(update={"google_sync_due": None, "version": 3})
    assert pass_changes_since(due, cleared) == {
        "$set": {"version": 3},
        "$unset": {"google_sync_due": ""},
    }
    assert "$unset" not in pass_changes_since(record, _renamed(record, "New"))
    async with repo.unit_of_work() as uow:
        await uow.replace_pass(cleared, expected_version=record.version)
    stored = await repo.passes.find_one({"_id": record.id})
    assert stored is not None
    assert "google_sync_due" not in stored


# erase_pass_copies: a redaction finds the stored command results that hold the pass through
# their `refs` index, not by reading every result of the last 48 hours.


def _result(pass_id: str) -> dict[str, object]:
    return {"id": pass_id, "object": "pass", "account_id": "acct_test", "holder_name": "Ada"}


async def _record(repo: IssuerRepository, command_id: str, result: dict[str, object]) -> None:
    async with repo.unit_of_work() as uow:
        await uow.record_command(command_id, result, datetime.now(UTC))


async def test_a_redaction_reads_only_the_results_that_hold_the_pass(
    repo: IssuerRepository, mongo_url: str
) -> None:
    for n in range(200):
        await _record(repo, f"command_other{n}", _result(f"pass_other{n}"))
    await _record(repo, "command_mine", _result("pass_mine"))
    # A rejected scan of the pass's code that named no pass (the other mode's key).
    scan = {"id": "scan_1", "object": "scan", "account_id": "acct_test", "pass_id": None}
    await _record(repo, "command_scan", {**scan, "code": "CODE-7"})

    async with recording_finds(mongo_url) as (client, finds):
        watched = IssuerRepository(client, client[repo.db.name])
        async with watched.unit_of_work() as uow:
            await uow.erase_pass_copies("pass_mine", "CODE-7", "acct_test")
    [query] = [found for collection, found in finds if collection == repo.processed.name]
    explained = await repo.processed.find(query).explain()

    assert explained["executionStats"]["totalDocsExamined"] <= 2  # of 202
    assert (await repo.processed_result("command_mine") or {})["holder_name"] is None
    assert (await repo.processed_result("command_scan") or {})["code"] is None
    assert (await repo.processed_result("command_other0") or {})["holder_name"] == "Ada"
    # The digest of the code goes with the code.
    assert (await repo.processed.find_one({"_id": "command_scan"}) or {})[REFS] == ["scan_1"]


async def test_a_result_stored_before_refs_existed_is_still_found(repo: IssuerRepository) -> None:
    legacy = {"_id": "command_old", "result": _result("pass_mine"), "expires_at": datetime.now(UTC)}
    await repo.processed.insert_one(legacy)

    async with repo.unit_of_work() as uow:
        await uow.erase_pass_copies("pass_mine")

    assert (await repo.processed_result("command_old") or {})["holder_name"] is None
