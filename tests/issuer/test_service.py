"""IssuerService called directly against the real store, below NATS and HTTP: what each command
writes (the record, its signed pass file, its event in the outbox), what it refuses, and that
a command replayed under its command id answers its stored result without writing again. Also:
a command that keeps conflicting (a transaction abandoned by a crashed issuer holds its keys
until the store's lifetime limit) gets a retryable error within its budget, and a result NATS
could not carry is refused before anything is written."""

import asyncio
import itertools
import json
import secrets
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from pydantic import BaseModel

from services.issuer.artifacts import WalletArtifacts
from services.issuer.config import IssuerSettings
from services.issuer.google.passes import GoogleWallet
from services.issuer.identity import load_identities
from services.issuer.repository import ConcurrentUpdate, IssuerRepository
from services.issuer.service import IssuerService
from shared.clock import SystemClock
from shared.errors import (
    ApiError,
    AuthorizationError,
    InternalError,
    InvalidRequest,
    NotFound,
    PayloadTooLarge,
)
from shared.ids import id_value
from shared.messages import (
    LIVE_UPDATES_SUBJECT_PREFIX,
    CreateDownloadLink,
    CreatePass,
    CreateTemplate,
    LiveUpdate,
    PassEventMessage,
    UpdatePass,
    UpdateTemplate,
    VoidPass,
)
from shared.models import Mode, PassRecord, TemplateRecord
from shared.mongo import MongoClient
from tests.support.api import TEMPLATE_BODY
from tests.support.database import commands_sent
from tests.support.issuer import archive_command
from tests.support.outbox import outbox_messages

ACCOUNT = "acct_service"
SITE = "http://tessera.test"
HANG_GUARD_SECONDS = 20


def _base(mode: Mode = "test", account: str = ACCOUNT) -> dict[str, Any]:
    """The fields every command carries, under a fresh command id."""
    return {"command_id": str(uuid.uuid4()), "account_id": account, "mode": mode}


def _create_template(command_id: str) -> CreateTemplate:
    return CreateTemplate(
        command_id=command_id,
        account_id="acct_conflict",
        mode="test",
        name=TEMPLATE_BODY["name"],
        template_type=TEMPLATE_BODY["type"],
        apple_style=TEMPLATE_BODY["apple_style"],
        design=TEMPLATE_BODY["design"],
    )


def _template_command(mode: Mode = "test") -> CreateTemplate:
    return _create_template(str(uuid.uuid4())).model_copy(update=_base(mode))


@pytest.fixture
async def repo(client: MongoClient) -> AsyncIterator[IssuerRepository]:
    """The issuer's repository on a database of the test's own, with its indexes."""
    db = client[f"t_{secrets.token_hex(6)}"]
    repository = IssuerRepository(client, db)
    await repository.ensure_indexes()
    try:
        yield repository
    finally:
        await client.drop_database(db.name)


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> WalletArtifacts:
    """What the issuer signs with when nothing is configured: the development identities."""
    data_dir: Path = tmp_path_factory.mktemp("issuer-data")
    identities = load_identities(IssuerSettings.model_validate({"data_dir": data_dir}))
    google = GoogleWallet(identities.google, None, origins=[SITE])
    return WalletArtifacts(identities, google, site_url=SITE, wallet_url=SITE)


@pytest.fixture
def service(repo: IssuerRepository, artifacts: WalletArtifacts) -> IssuerService:
    return IssuerService(repo, artifacts, SystemClock(), lambda: None)


def _kept(record: BaseModel | None) -> dict[str, Any]:
    """A record as the store keeps it: its times to the millisecond (BSON's precision)."""
    assert record is not None
    return {
        name: value.replace(microsecond=value.microsecond // 1000 * 1000)
        if isinstance(value, datetime)
        else value
        for name, value in record.model_dump().items()
    }


def _as(kind: type[BaseModel], result: BaseModel) -> Any:
    assert isinstance(result, kind), result
    return result


async def _template(service: IssuerService, mode: Mode = "test") -> TemplateRecord:
    record: TemplateRecord = _as(TemplateRecord, await service.handle(_template_command(mode)))
    return record


async def _run(service: IssuerService, command: CreatePass | UpdatePass | VoidPass) -> PassRecord:
    record: PassRecord = _as(PassRecord, await service.handle(command))
    return record


async def _outbox(repo: IssuerRepository) -> list[tuple[str, PassEventMessage]]:
    """What the commands left for the relay (which does not run here), oldest first: each
    event with where it goes, "live" (the live-updates queue) or "events" (the stream)."""
    found = []
    for doc in await outbox_messages(repo.db["outbox"]):
        if doc["subject"].startswith(f"{LIVE_UPDATES_SUBJECT_PREFIX}."):
            found.append(("live", LiveUpdate.model_validate_json(doc["payload"]).event))
        else:
            found.append(("events", PassEventMessage.model_validate_json(doc["payload"])))
    return found


async def _pass_file(repo: IssuerRepository, pass_id: str) -> dict[str, Any]:
    stored = await repo.pass_files.find_one({"_id": pass_id})
    assert stored is not None
    return stored


async def test_create_stores_the_pass_its_signed_file_and_one_created_event(
    service: IssuerService, repo: IssuerRepository
) -> None:
    template = await _template(service)
    assert await _outbox(repo) == []  # a template is no pass event
    created = await _run(
        service,
        CreatePass(
            **_base(),
            template_id=template.id,
            holder_name="Ada",
            field_values={"gate": "3"},
            metadata={"order": 7},
        ),
    )

    assert _kept(await repo.pass_(ACCOUNT, "test", created.id)) == _kept(created)
    assert (created.template_id, created.version, created.voided) == (template.id, 1, False)
    assert (created.field_values, created.metadata) == ({"gate": "3"}, {"order": 7})
    assert created.google_save_url is not None
    stored_file = await _pass_file(repo, created.id)
    assert stored_file["version"] == 1
    pass_json = json.loads(stored_file["pass_json"])
    assert pass_json["serialNumber"] == created.serial_number
    assert pass_json["authenticationToken"] == created.authentication_token
    [(queue, event)] = await _outbox(repo)
    assert (queue, event.event_type, event.pass_id) == ("events", "created", created.id)
    assert (event.account_id, event.mode) == (ACCOUNT, "test")
    assert event.pass_snapshot == created.snapshot()


async def test_an_update_merges_into_what_is_stored_and_goes_out_as_a_live_update(
    service: IssuerService, repo: IssuerRepository
) -> None:
    template = await _template(service)
    created = await _run(
        service,
        CreatePass(
            **_base(), template_id=template.id, field_values={"seat": "A1"}, metadata={"a": 1}
        ),
    )
    before = await _pass_file(repo, created.id)
    updated = await _run(
        service,
        UpdatePass(
            **_base(), pass_id=created.id, field_values={"gate": "3"}, metadata={"a": None, "b": 2}
        ),
    )

    assert updated.field_values == {"seat": "A1", "gate": "3"}
    assert updated.metadata == {"b": 2}  # a null value removes the key
    assert updated.version == 2
    assert _kept(await repo.pass_(ACCOUNT, "test", created.id)) == _kept(updated)
    after = await _pass_file(repo, created.id)
    assert after["version"] == 2
    assert after["last_modified"] > before["last_modified"]
    assert after["signature"] != before["signature"]
    queued = [(queue, event.event_type) for queue, event in await _outbox(repo)]
    assert queued == [("events", "created"), ("live", "updated")]
    live = (await _outbox(repo))[1][1]
    assert live.metadata == {"stage": "pushed", "field_values": ["gate"], "metadata": ["a", "b"]}


async def test_a_new_version_is_stamped_after_the_last_without_reading_its_file(
    service: IssuerService, repo: IssuerRepository
) -> None:
    """The pass keeps its file's Last-Modified, so the next version's (a second later at least,
    docs/wallet-callbacks.md) is made from the pass read anyway; a pass stored before it kept
    one has its file's read."""
    template = await _template(service)
    created = await _run(service, CreatePass(**_base(), template_id=template.id))
    first = await _pass_file(repo, created.id)
    assert created.file_modified_at == first["last_modified"]
    with commands_sent() as reads:
        updated = await _run(
            service, UpdatePass(**_base(), pass_id=created.id, field_values={"gate": "3"})
        )
    second = await _pass_file(repo, created.id)
    assert second["last_modified"] > first["last_modified"]
    assert updated.file_modified_at == second["last_modified"]
    # The pass and its template (no template cache here); not its file.
    assert reads == ["find", "find", "bulkWrite", "commitTransaction"]

    # Stored before the stamp was kept: the file's is read, and the next is still later.
    far = second["last_modified"] + timedelta(hours=1)
    await repo.pass_files.update_one({"_id": created.id}, {"$set": {"last_modified": far}})
    await repo.passes.update_one({"_id": created.id}, {"$unset": {"file_modified_at": ""}})
    await _run(service, UpdatePass(**_base(), pass_id=created.id, field_values={"gate": "4"}))
    assert (await _pass_file(repo, created.id))["last_modified"] == far + timedelta(seconds=1)


async def test_void_marks_the_pass_once_and_a_second_void_records_nothing(
    service: IssuerService, repo: IssuerRepository
) -> None:
    template = await _template(service)
    created = await _run(service, CreatePass(**_base(), template_id=template.id))
    voided = await _run(service, VoidPass(**_base(), pass_id=created.id))

    assert voided.voided
    assert voided.voided_at is not None
    assert voided.version == 2
    assert (await _pass_file(repo, created.id))["version"] == 2
    again = await _run(service, VoidPass(**_base(), pass_id=created.id))
    assert _kept(again) == _kept(voided)
    queued = [(queue, event.event_type) for queue, event in await _outbox(repo)]
    assert queued == [("events", "created"), ("live", "voided")]


async def test_a_voided_pass_refuses_updates_and_download_links_and_stores_nothing(
    service: IssuerService, repo: IssuerRepository
) -> None:
    template = await _template(service)
    created = await _run(service, CreatePass(**_base(), template_id=template.id))
    voided = await _run(service, VoidPass(**_base(), pass_id=created.id))
    update = UpdatePass(**_base(), pass_id=created.id, field_values={"gate": "9"})
    now = SystemClock().now()
    link = CreateDownloadLink(
        **_base(),
        pass_id=created.id,
        token_hash="0" * 64,
        expires_in=60,
        created_at=now,
        expires_at=now,
    )

    for command in (update, link):
        with pytest.raises(InvalidRequest) as refused:
            await service.handle(command)
        assert refused.value.code == "pass_voided"
        assert await repo.processed_result(command.command_id) is None
    assert _kept(await repo.pass_(ACCOUNT, "test", created.id)) == _kept(voided)
    assert await repo.download_links.count_documents({}) == 0
    assert len(await _outbox(repo)) == 2  # created and voided, nothing more


async def test_an_archived_template_issues_no_pass(
    service: IssuerService, repo: IssuerRepository
) -> None:
    template = await _template(service)
    archive = UpdateTemplate(**_base(), template_id=template.id, archived=True)
    archived: TemplateRecord = _as(TemplateRecord, await service.handle(archive))
    assert archived.archived

    with pytest.raises(InvalidRequest) as refused:
        await service.handle(CreatePass(**_base(), template_id=template.id))
    assert (refused.value.code, refused.value.param) == ("template_archived", "template_id")
    assert await repo.passes.count_documents({}) == 0
    assert await _outbox(repo) == []


async def test_a_template_change_committed_while_a_patch_was_prepared_is_not_undone(
    service: IssuerService, repo: IssuerRepository
) -> None:
    """A design PATCH is prepared from a read of the template (its images cleaned, its
    rollout planned: slow); an archiving commits meanwhile. The PATCH's write must not put
    the template back as it read it: it was guarded by `design_version` alone, which the
    archiving does not change, and the template came back unarchived."""
    template = await _template(service)
    moved = {**TEMPLATE_BODY["design"], "description": "Moved"}
    patch = UpdateTemplate(**_base(), template_id=template.id, design=moved)
    prepared = await service._prepare(patch)
    await service.handle(UpdateTemplate(**_base(), template_id=template.id, archived=True))

    with pytest.raises(ConcurrentUpdate):
        async with repo.unit_of_work() as uow:
            await prepared.apply(uow)

    patched = _as(TemplateRecord, await service.handle(patch))  # prepared again, from now
    assert (patched.archived, patched.design_version) == (True, 2)
    stored = await repo.template(ACCOUNT, "test", template.id)
    assert stored is not None
    assert (stored.archived, stored.design["description"]) == (True, "Moved")


async def test_a_replayed_command_answers_its_stored_result_without_writing_again(
    service: IssuerService, repo: IssuerRepository
) -> None:
    template = await _template(service)
    create = CreatePass(**_base(), template_id=template.id, holder_name="Ada")
    created = await _run(service, create)
    update = UpdatePass(**_base(), pass_id=created.id, metadata={"n": 1})
    updated = await _run(service, update)

    # Each replay answers what its command answered the first time, even the create's after
    # the pass moved on, and writes nothing: no second pass, version or event.
    assert _kept(await _run(service, create)) == _kept(created)
    assert _kept(await _run(service, update)) == _kept(updated)
    assert await repo.passes.count_documents({}) == 1
    assert _kept(await repo.pass_(ACCOUNT, "test", created.id)) == _kept(updated)
    assert (await _pass_file(repo, created.id))["version"] == 2
    assert len(await _outbox(repo)) == 2


async def test_a_replay_its_preparation_now_refuses_answers_the_first_result(
    service: IssuerService, repo: IssuerRepository
) -> None:
    """A replay is prepared again (no lookup of its command id first): when that preparation
    refuses it, the template archived since, the first run's stored result still answers;
    a new command is refused."""
    template = await _template(service)
    create = CreatePass(**_base(), template_id=template.id, holder_name="Ada")
    created = await _run(service, create)
    await service.handle(archive_command(template.id))

    assert _kept(await _run(service, create)) == _kept(created)
    with pytest.raises(ApiError):
        await service.handle(CreatePass(**_base(), template_id=template.id))
    assert await repo.passes.count_documents({}) == 1


async def test_commands_see_only_their_own_account_and_mode(
    service: IssuerService, repo: IssuerRepository
) -> None:
    template = await _template(service)
    created = await _run(service, CreatePass(**_base(), template_id=template.id))
    elsewhere: list[Callable[[], CreatePass | UpdatePass]] = [
        lambda: CreatePass(**_base(account="acct_other"), template_id=template.id),
        lambda: CreatePass(**_base(mode="live"), template_id=template.id),
        lambda: UpdatePass(**_base(account="acct_other"), pass_id=created.id, metadata={"x": 1}),
    ]
    for command in elsewhere:
        with pytest.raises(NotFound):
            await service.handle(command())
    assert await repo.passes.count_documents({}) == 1


async def test_development_identities_issue_no_live_pass(
    service: IssuerService, repo: IssuerRepository
) -> None:
    template = await _template(service, mode="live")
    with pytest.raises(AuthorizationError) as refused:
        await service.handle(CreatePass(**_base(mode="live"), template_id=template.id))
    assert refused.value.code == "live_signing_not_configured"
    assert await repo.passes.count_documents({}) == 0


async def test_a_conflict_that_outlasts_the_budget_is_a_retryable_error(
    client: MongoClient, repo: IssuerRepository
) -> None:
    # Template commands need no wallet artifacts; the service only keeps a reference.
    artifacts = cast(WalletArtifacts, SimpleNamespace(identities=None))
    service = IssuerService(
        repo, artifacts, SystemClock(), lambda: None, conflict_budget_seconds=0.5
    )
    command_id = str(uuid.uuid4())
    await repo.processed.insert_one({"_id": "warm-up"})
    blocker = client.start_session()
    try:
        # Like the first attempt of a command whose issuer died before committing.
        await blocker.start_transaction()
        await repo.processed.insert_one({"_id": command_id, "result": {}}, session=blocker)
        # A hang guard only, shorter than the store's 60 s transaction lifetime: a service that
        # ignored its budget would still be retrying when it fires.
        with commands_sent() as sent, pytest.raises(InternalError) as raised:
            async with asyncio.timeout(HANG_GUARD_SECONDS):
                await service.handle(_create_template(command_id))
        assert raised.value.code == "write_conflict"
        assert "retry" in raised.value.message
        # It tried the commit again while its budget lasted, then gave up.
        assert sent.count("bulkWrite") > 1
        await blocker.abort_transaction()
        result = await service.handle(_create_template(command_id))
        assert result.model_dump()["name"] == TEMPLATE_BODY["name"]
        # A replay answers from the stored result.
        assert await service.handle(_create_template(command_id)) == result
    finally:
        await blocker.end_session()


async def test_a_result_nats_could_not_carry_is_refused_before_anything_is_written(
    repo: IssuerRepository,
) -> None:
    """A stored result whose reply cannot be sent answers a timeout forever (issue 10, F02)."""
    artifacts = cast(WalletArtifacts, SimpleNamespace(identities=None))
    service = IssuerService(
        repo, artifacts, SystemClock(), lambda: None, message_limit=lambda: 40_000
    )
    big = {
        **TEMPLATE_BODY["design"],
        "localizations": {"de": {f"k{i}": "x" * 2000 for i in range(20)}},
    }
    command = _create_template(str(uuid.uuid4())).model_copy(update={"design": big})
    with pytest.raises(PayloadTooLarge) as raised:
        await service.handle(command)
    assert raised.value.code == "result_too_large"
    assert await repo.templates.count_documents({}) == 0
    assert await repo.processed.count_documents({}) == 0


async def test_template_ids_made_together_do_not_tell_each_other(service: IssuerService) -> None:
    """A template's logo is public at /t/{template_id}/logo.png (archived and test templates
    too), reached by its id alone: ids made in the same millisecond were the previous one plus
    one, so an account that made a template beside another's could read the other's logo."""
    made = await asyncio.gather(
        *(service.handle(_create_template(f"cmd_ids_{n}")) for n in range(20))
    )
    values = sorted(id_value(record.id) for record in made if isinstance(record, TemplateRecord))
    assert len(values) == 20
    assert all(later - earlier > 1 for earlier, later in itertools.pairwise(values))
