"""UnitOfWork.replace_passes against the real store: many passes changed, each only at the
version it was read at, whether the pass changed before the unit of work read it (refused at
once) or after (a write conflict of the transaction); nothing of a refused unit is written;
only the fields that changed are written."""

import pytest
from pymongo.errors import PyMongoError

from services.issuer.repository import ConcurrentUpdate, IssuerRepository, pass_changes_since
from shared.models import PassRecord
from shared.mongo import is_write_conflict
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
