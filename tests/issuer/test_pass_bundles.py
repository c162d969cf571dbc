"""Pass bundles (services/issuer/pass_bundles.py) against the real store, below NATS and HTTP:
`CreatePassBundle` checks every id with its param and writes nothing when it refuses one; a batch
with `bundle` makes the bundle of the passes it made in the same transaction; replays answer the
stored bundle."""

import pytest

from services.issuer.repository import IssuerRepository
from services.issuer.service import IssuerService
from shared.errors import ApiError
from shared.messages import (
    BatchRow,
    CreatePass,
    CreatePassBundle,
    CreatePasses,
    PassesCreated,
    UpdateTemplate,
    VoidPass,
)
from shared.models import PassBundleRecord, PassRecord, TemplateRecord
from tests.support.issuer import (
    command_base,
    template_command,
)


async def _template(service: IssuerService, *, hidden: bool = False) -> TemplateRecord:
    record = await service.handle(template_command())
    assert isinstance(record, TemplateRecord)
    if hidden:
        update = UpdateTemplate(**command_base(), template_id=record.id, require_download_link=True)
        record = await service.handle(update)
        assert isinstance(record, TemplateRecord)
    return record


async def _passes(service: IssuerService, template: TemplateRecord, count: int) -> list[str]:
    ids = []
    for n in range(count):
        command = CreatePass(
            **command_base(), template_id=template.id, field_values={"seat": f"A{n}"}
        )
        record = await service.handle(command)
        assert isinstance(record, PassRecord)
        ids.append(record.id)
    return ids


async def _refused(service: IssuerService, command: CreatePassBundle) -> ApiError:
    with pytest.raises(ApiError) as raised:
        await service.handle(command)
    return raised.value


async def test_a_bundle_keeps_its_passes_in_order_and_a_replay_answers_it(
    service: IssuerService, repo: IssuerRepository
) -> None:
    pass_ids = await _passes(service, await _template(service), 3)
    command = CreatePassBundle(**command_base(), pass_ids=pass_ids[::-1])

    bundle = await service.handle(command)
    replayed = await service.handle(command)

    assert isinstance(bundle, PassBundleRecord)
    assert bundle.id.startswith("pbdl_")
    assert bundle.pass_ids == pass_ids[::-1]
    assert (bundle.account_id, bundle.mode) == (command.account_id, "test")
    assert replayed == bundle
    assert await repo.db["pass_bundles"].count_documents({}) == 1


async def test_every_refused_id_is_named_and_nothing_is_written(
    service: IssuerService, repo: IssuerRepository
) -> None:
    template = await _template(service)
    pass_ids = await _passes(service, template, 2)
    await service.handle(VoidPass(**command_base(), pass_id=pass_ids[1]))
    [other_account] = await _passes_of_account(service, "acct_other")
    [hidden] = await _passes(service, await _template(service, hidden=True), 1)
    cases = {
        # another account's pass answers exactly like a missing one
        (pass_ids[0], other_account): (404, "resource_missing", "pass_ids.1"),
        (pass_ids[0], "pass_0000000000000000000000"): (404, "resource_missing", "pass_ids.1"),
        (pass_ids[1],): (400, "pass_voided", "pass_ids.0"),
        (pass_ids[0], pass_ids[0]): (400, "parameter_invalid", "pass_ids.1"),
        (pass_ids[0], hidden): (400, "download_link_required", "pass_ids.1"),
        (): (400, "parameter_invalid", "pass_ids"),
        tuple(pass_ids[:1] * 11): (400, "parameter_invalid", "pass_ids"),
    }
    for ids, expected in cases.items():
        error = await _refused(service, CreatePassBundle(**command_base(), pass_ids=list(ids)))
        assert (error.status, error.code, error.param) == expected, ids
        if error.status == 404:
            assert error.message == f"No such pass: '{ids[1]}'"
    assert await repo.db["pass_bundles"].count_documents({}) == 0


async def _passes_of_account(service: IssuerService, account: str) -> list[str]:
    template = await service.handle(template_command().model_copy(update={"account_id": account}))
    assert isinstance(template, TemplateRecord)
    command = CreatePass(**command_base(account=account), template_id=template.id)
    record = await service.handle(command)
    assert isinstance(record, PassRecord)
    return [record.id]


async def test_a_batch_bundles_the_passes_it_made_in_row_order(
    service: IssuerService, repo: IssuerRepository
) -> None:
    template = await _template(service)
    hidden = await _template(service, hidden=True)
    rows = [
        BatchRow(index=0, template_id=template.id, field_values={"seat": "A1"}),
        BatchRow(index=1, template_id=template.id, field_values={"nope": "x"}),
        BatchRow(index=2, template_id=hidden.id),
        BatchRow(index=3, template_id=template.id, field_values={"seat": "A2"}),
    ]
    command = CreatePasses(**command_base(), rows=rows, bundle=True)

    result = await service.handle(command)
    replayed = await service.handle(command)

    assert isinstance(result, PassesCreated)
    made = [row.record.id for row in result.rows if row.record is not None]
    assert len(made) == 2
    assert result.bundle is not None
    assert result.bundle.pass_ids == made
    # A template behind download links cannot be in a bundle: its rows fail alone.
    error = result.rows[2].error
    assert error is not None
    assert (error.status, error.code, error.param) == (400, "download_link_required", "template_id")
    assert replayed == result
    assert await repo.db["pass_bundles"].count_documents({}) == 1


async def test_a_batch_without_bundle_makes_none_and_one_too_long_is_refused(
    service: IssuerService, repo: IssuerRepository
) -> None:
    template = await _template(service)
    hidden = await _template(service, hidden=True)
    rows = [BatchRow(index=0, template_id=hidden.id)]

    plain = await service.handle(CreatePasses(**command_base(), rows=rows))
    failed = await service.handle(CreatePasses(**command_base(), rows=rows, bundle=True))
    eleven = [BatchRow(index=n, template_id=template.id) for n in range(11)]
    with pytest.raises(ApiError) as raised:
        await service.handle(CreatePasses(**command_base(), rows=eleven, bundle=True))

    assert isinstance(plain, PassesCreated)
    assert plain.bundle is None
    assert plain.rows[0].record is not None  # without a bundle, a hidden template is fine
    assert isinstance(failed, PassesCreated)
    assert failed.bundle is None  # no pass made, no bundle
    assert (raised.value.status, raised.value.param) == (400, "bundle")
    assert await repo.db["pass_bundles"].count_documents({}) == 0
