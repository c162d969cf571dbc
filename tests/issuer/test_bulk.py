"""Many passes in one command (`CreatePasses`, shared with import jobs: services/issuer/bulk.py)
against the real store: each row succeeds or fails alone with the error POST /v1/passes would
answer, the passes are written together with one event and one processed marker each, and a
replay answers the stored result without writing again."""

from typing import Any

from services.issuer.repository import IssuerRepository
from services.issuer.service import IssuerService
from shared.messages import BatchRow, CreatePasses, PassesCreated, PassEventMessage
from shared.models import TemplateRecord
from tests.support.issuer import (
    ACCOUNT,
    archive_command,
    command_base,
    template_command,
)
from tests.support.outbox import outbox_messages


async def _template(service: IssuerService) -> TemplateRecord:
    record = await service.handle(template_command())
    assert isinstance(record, TemplateRecord)
    return record


async def _create(service: IssuerService, command: CreatePasses) -> PassesCreated:
    result = await service.handle(command)
    assert isinstance(result, PassesCreated)
    return result


async def _counts(repo: IssuerRepository) -> dict[str, int]:
    db = repo.db
    counts = {
        name: await db[name].count_documents({})
        for name in ("passes", "pass_files", "processed_commands")
    }
    return counts | {"outbox": len(await outbox_messages(db["outbox"]))}


def _row(index: int, template_id: str, **fields: Any) -> BatchRow:
    return BatchRow(index=index, template_id=template_id, holder_name=f"Holder {index}", **fields)


async def test_a_batch_of_100_with_3_bad_rows_makes_97_passes_and_3_row_errors(
    service: IssuerService, repo: IssuerRepository
) -> None:
    template = await _template(service)
    bad = {
        7: {"field_values": {"nope": "x"}},  # not a field of the template
        42: {"metadata": {"expiration_date": "soon"}},  # not a date
        99: {"field_values": {"seat": "x" * 3000}},  # over the pass limits
    }
    rows = [
        _row(i, template.id, **bad.get(i, {"field_values": {"seat": f"A{i}"}})) for i in range(100)
    ]
    command = CreatePasses(**command_base(), rows=rows)

    result = await _create(service, command)

    assert [row.index for row in result.rows] == list(range(100))
    failed = {row.index: row.error for row in result.rows if row.error is not None}
    assert sorted(failed) == [7, 42, 99]
    assert failed[7] is not None
    assert failed[7].param == "field_values.nope"
    assert failed[42] is not None
    assert failed[42].param == "metadata.expiration_date"
    assert failed[99] is not None
    assert failed[99].code == "parameter_too_large"
    assert {error.status for error in failed.values() if error} == {400}
    made = [row.record for row in result.rows if row.record is not None]
    assert len(made) == 97
    # The long signed link is left out of the reply; "" says the pass has one.
    assert all(record.google_save_url == "" for record in made)
    assert made[0].field_values == {"seat": "A0"}
    assert made[0].holder_name == "Holder 0"
    stored = {doc["_id"]: doc async for doc in repo.passes.find({"account_id": ACCOUNT})}
    assert set(stored) == {record.id for record in made}
    assert all(doc["google_save_url"] == "" for doc in stored.values())  # signed when asked
    # One file and one created event per pass; the batch's processed marker (and the
    # template's), no marker per row: the batch commits once.
    assert await _counts(repo) == {
        "passes": 97,
        "pass_files": 97,
        "outbox": 97,
        "processed_commands": 1 + 1,
    }
    events = [
        PassEventMessage.model_validate_json(doc["payload"])
        for doc in await outbox_messages(repo.db["outbox"])
    ]
    assert sorted(event.pass_id for event in events) == sorted(stored)
    assert {event.event_type for event in events} == {"created"}

    replay = await _create(service, command)
    assert replay == result
    assert (await _counts(repo))["passes"] == 97


async def test_rows_of_unknown_and_archived_templates_fail_as_post_passes_answers(
    service: IssuerService, repo: IssuerRepository
) -> None:
    live = await _template(service)
    archived = await _template(service)
    await service.handle(archive_command(archived.id))
    missing = "tmpl_0000000000000000000000"
    rows = [_row(0, live.id), _row(1, missing), _row(2, archived.id), _row(3, live.id)]

    result = await _create(service, CreatePasses(**command_base(), rows=rows))

    assert [row.record is not None for row in result.rows] == [True, False, False, True]
    unknown, gone = result.rows[1].error, result.rows[2].error
    assert unknown is not None
    assert (unknown.status, unknown.code, unknown.param) == (
        404,
        "resource_missing",
        "template_id",
    )
    assert gone is not None
    assert (gone.status, gone.code, gone.param) == (
        400,
        "template_archived",
        "template_id",
    )
    assert await repo.passes.count_documents({}) == 2


async def test_a_batch_with_no_good_row_writes_nothing_but_its_result(
    service: IssuerService, repo: IssuerRepository
) -> None:
    template = await _template(service)
    rows = [_row(0, template.id, field_values={"nope": "1"})]
    result = await _create(service, CreatePasses(**command_base(), rows=rows))
    assert result.rows[0].error is not None
    assert await _counts(repo) == {
        "passes": 0,
        "pass_files": 0,
        "outbox": 0,
        "processed_commands": 2,  # the template's and the batch's
    }
