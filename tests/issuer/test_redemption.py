"""Redemption policies and the `RedeemPass` command (docs/redemption.md): the policy's
validation and defaults, the decision of a scan, and the command against the real store:
counted once, recorded always, replayed by its command id, exact under concurrent scans, and
never undone by a pass update that read the pass before the scan counted."""

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from services.issuer.artifacts import WalletArtifacts
from services.issuer.redemption import decide, uses_up
from services.issuer.repository import ConcurrentUpdate, IssuerRepository
from services.issuer.scan_store import ScanStore
from services.issuer.scans import Redemptions
from services.issuer.service import IssuerService
from shared.clock import SystemClock
from shared.errors import InvalidRequest
from shared.messages import CreatePass, RedactPass, RedeemPass, UpdatePass, UpdateTemplate
from shared.models import PassRecord, TemplateRecord
from shared.redemption import RedemptionInput, RedemptionPolicy, resolve_policy
from shared.scans import ScanRecord
from tests.issuer.pkpass_samples import b64, png
from tests.support.issuer import command_base, issuer_repository, template_command
from tests.support.outbox import outbox_messages

NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)


# --- the policy -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("template_type", "limit"),
    [("event", 1), ("coupon", 1), ("membership", None), ("loyalty", None), ("generic", None)],
)
def test_the_defaults_depend_on_the_template_type(template_type: str, limit: int | None) -> None:
    policy = resolve_policy(template_type, None)
    assert policy == RedemptionPolicy(max_redemptions=limit, on_limit="mark_used")
    assert resolve_policy(template_type, {}) == policy


def test_keys_sent_replace_the_defaults_and_the_others_stay() -> None:
    assert resolve_policy("event", {"max_redemptions": None}).max_redemptions is None
    assert resolve_policy("event", {"on_limit": "keep"}).max_redemptions == 1
    assert resolve_policy("membership", {"max_redemptions": 3}).max_redemptions == 3
    window = resolve_policy("event", {"valid_from": "2026-12-01T18:00:00+01:00"})
    assert window.valid_from == datetime(2026, 12, 1, 17, 0, tzinfo=UTC)
    assert window.max_redemptions == 1


@pytest.mark.parametrize(
    ("sent", "field"),
    [
        ({"max_redemptions": 0}, "max_redemptions"),
        ({"max_redemptions": -2}, "max_redemptions"),
        ({"max_redemptions": "3"}, "max_redemptions"),
        ({"max_redemptions": 1.5}, "max_redemptions"),
        ({"valid_from": "2026-12-01T18:00:00"}, "valid_from"),  # no offset
        ({"valid_until": "tomorrow"}, "valid_until"),
        ({"on_limit": "void"}, "on_limit"),
        ({"limit": 1}, "limit"),
    ],
)
def test_invalid_policies_name_the_field(sent: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        RedemptionInput.model_validate(sent)
    assert caught.value.errors()[0]["loc"] == (field,)


def test_a_window_that_ends_before_it_starts_is_refused_with_a_dotted_param() -> None:
    for until in ("2026-12-01T18:00:00+00:00", "2026-12-01T10:00:00+00:00"):
        with pytest.raises(InvalidRequest) as caught:
            RedemptionInput.model_validate(
                {"valid_from": "2026-12-01T18:00:00+00:00", "valid_until": until}
            )
        assert caught.value.param == "redemption.valid_until"


# --- the decision -----------------------------------------------------------------------------


def _pass(**fields: Any) -> PassRecord:
    return PassRecord.model_validate(
        {
            "_id": "pass_x",
            "account_id": "acct_x",
            "mode": "test",
            "short_id": "s",
            "template_id": "tmpl_x",
            "serial_number": "serial",
            "authentication_token": "t",
            "created_at": NOW,
            "updated_at": NOW,
            **fields,
        }
    )


def test_each_reason_in_its_order() -> None:
    single = RedemptionPolicy(max_redemptions=1)
    assert decide(_pass(), single, NOW) is None
    assert decide(_pass(redemption_count=1), single, NOW) == "already_redeemed"
    # Voided wins over everything, then the window, then the count.
    assert decide(_pass(voided=True, redemption_count=1), single, NOW) == "voided"
    later = single.model_copy(update={"valid_from": NOW + timedelta(seconds=1)})
    assert decide(_pass(redemption_count=1), later, NOW) == "not_yet_valid"
    over = single.model_copy(update={"valid_until": NOW})
    assert decide(_pass(redemption_count=1), over, NOW) == "expired"
    inside = single.model_copy(update={"valid_from": NOW, "valid_until": NOW + timedelta(1)})
    assert decide(_pass(), inside, NOW) is None
    unlimited = RedemptionPolicy(max_redemptions=None)
    assert decide(_pass(redemption_count=10_000), unlimited, NOW) is None
    # The pass's own end (a membership's expiration_date), which no template policy says.
    assert decide(_pass(), unlimited, NOW, NOW) == "expired"
    assert decide(_pass(), unlimited, NOW, NOW + timedelta(seconds=1)) is None


def test_only_the_last_allowed_scan_of_a_mark_used_policy_uses_the_pass_up() -> None:
    three = RedemptionPolicy(max_redemptions=3)
    assert not uses_up(_pass(redemption_count=1), three)
    assert uses_up(_pass(redemption_count=2), three)
    assert not uses_up(_pass(redemption_count=2), three.model_copy(update={"on_limit": "keep"}))
    assert not uses_up(_pass(redemption_count=50), RedemptionPolicy(max_redemptions=None))


# --- the command, on the real store ------------------------------------------------------------


@pytest.fixture
async def repo(mongo_url: str) -> AsyncIterator[IssuerRepository]:
    async with issuer_repository(mongo_url) as repository:
        await ScanStore(repository.db).ensure_indexes()
        yield repository


@pytest.fixture
def service(repo: IssuerRepository, artifacts: WalletArtifacts) -> IssuerService:
    return IssuerService(repo, artifacts, SystemClock(), lambda: None, conflict_budget_seconds=30)


async def _issue(service: IssuerService, **policy: Any) -> tuple[TemplateRecord, PassRecord]:
    command = template_command().model_copy(update={"redemption": policy})
    template = await service.handle(command)
    assert isinstance(template, TemplateRecord)
    record = await service.handle(
        CreatePass(**command_base(), template_id=template.id, holder_name="Ada")
    )
    assert isinstance(record, PassRecord)
    return template, record


async def _scan(service: IssuerService, **fields: Any) -> ScanRecord:
    scan = await service.handle(RedeemPass(**command_base(), **fields))
    assert isinstance(scan, ScanRecord)
    return scan


async def _events(repo: IssuerRepository, subject: str) -> int:
    messages = await outbox_messages(repo.db["outbox"])
    return sum(1 for message in messages if message["subject"] == subject)


async def test_a_single_use_pass_is_accepted_once_and_every_scan_is_recorded(
    service: IssuerService, repo: IssuerRepository
) -> None:
    _, record = await _issue(service)
    assert record.barcode_message == record.serial_number  # the template's {serial_number}
    assert record.redemption_limit == 1
    first = await _scan(service, code=record.serial_number, location="North gate")
    assert (first.result, first.reason, first.redemption_count) == ("accepted", None, 1)
    assert first.redemptions_remaining == 0
    assert first.scanned_pass is not None
    assert first.scanned_pass.holder_name == "Ada"
    second = await _scan(service, pass_id=record.id)
    assert (second.result, second.reason, second.redemption_count) == (
        "rejected",
        "already_redeemed",
        1,
    )
    unknown = await _scan(service, code="nothing like it")
    assert (unknown.reason, unknown.pass_id, unknown.scanned_pass) == ("unknown_code", None, None)
    assert await repo.db["scans"].count_documents({}) == 3
    assert await _events(repo, "tessera.events.pass.redeemed") == 1
    # The last redemption of a mark_used policy re-rendered the pass as used and pushes it.
    stored = await repo.pass_(record.account_id, "test", record.id)
    assert stored is not None
    assert stored.used_up
    assert not stored.voided
    assert (stored.redemption_count, stored.version) == (1, 2)
    assert await _events(repo, "tessera.live.pass.updated") == 1
    # The pass keeps its new file's Last-Modified: the next version's is made after it.
    file = await repo.pass_files.find_one({"_id": record.id})
    assert file is not None
    assert stored.file_modified_at == file["last_modified"] > record.file_modified_at


async def test_a_redaction_erases_the_codes_its_scans_read(
    service: IssuerService, repo: IssuerRepository
) -> None:
    """A barcode may show a field value (a member number): the code scanned is the holder's
    data too, in the scan record and in the scan command's stored result."""
    _, record = await _issue(service, max_redemptions=None)
    command = RedeemPass(**command_base(), code=record.serial_number)
    await service.handle(command)

    await service.handle(RedactPass(**command_base(), pass_id=record.id))

    scan = await repo.db["scans"].find_one({"pass_id": record.id})
    assert scan is not None
    assert (scan["code"], scan["scanned_pass"]["holder_name"]) == (None, None)
    kept = await repo.processed_result(command.command_id)
    assert kept is not None
    assert kept["code"] is None


async def test_a_redaction_erases_the_digest_of_the_google_object_last_synced(
    service: IssuerService, repo: IssuerRepository
) -> None:
    """The digest hashes an object made from the holder's name and field values: it goes with
    them, whether or not Google ever takes the redacted object."""
    _, record = await _issue(service, max_redemptions=None)
    await repo.passes.update_one({"_id": record.id}, {"$set": {"google_object_digest": "d" * 64}})

    await service.handle(RedactPass(**command_base(), pass_id=record.id))

    stored = await repo.passes.find_one({"_id": record.id})
    assert stored is not None
    assert stored.get("google_object_digest") is None


async def test_a_redaction_erases_its_code_from_scans_that_did_not_name_it(
    service: IssuerService, repo: IssuerRepository
) -> None:
    """A scan in the other mode (`wrong_mode`) read the pass's code but names no pass."""
    _, record = await _issue(service, max_redemptions=None)
    command = RedeemPass(**command_base("live"), code=record.serial_number)
    scan = await service.handle(command)
    assert scan.reason == "wrong_mode"  # type: ignore[attr-defined]

    await service.handle(RedactPass(**command_base(), pass_id=record.id))

    stored = await repo.db["scans"].find_one({"_id": scan.id})  # type: ignore[attr-defined]
    assert stored is not None
    assert stored["code"] is None
    kept = await repo.processed_result(command.command_id)
    assert kept is not None
    assert kept["code"] is None


async def test_a_replayed_scan_answers_the_same_scan_and_counts_nothing(
    service: IssuerService, repo: IssuerRepository
) -> None:
    _, record = await _issue(service, max_redemptions=None)
    command = RedeemPass(**command_base(), code=record.serial_number)
    first, again = await service.handle(command), await service.handle(command)
    assert first == again
    stored = await repo.pass_(record.account_id, "test", record.id)
    assert stored is not None
    assert stored.redemption_count == 1


async def test_another_mode_answers_wrong_mode_and_another_account_unknown_code(
    service: IssuerService,
) -> None:
    _, record = await _issue(service, max_redemptions=None)
    live = RedeemPass(**command_base("live"), code=record.serial_number)
    assert (await service.handle(live)).reason == "wrong_mode"  # type: ignore[attr-defined]
    by_id = RedeemPass(**command_base("live"), pass_id=record.id)
    assert (await service.handle(by_id)).reason == "wrong_mode"  # type: ignore[attr-defined]
    other = RedeemPass(**command_base(account="acct_other"), code=record.serial_number)
    assert (await service.handle(other)).reason == "unknown_code"  # type: ignore[attr-defined]


async def test_twenty_concurrent_scans_of_a_pass_allowing_three_accept_exactly_three(
    service: IssuerService, repo: IssuerRepository
) -> None:
    _, record = await _issue(service, max_redemptions=3, on_limit="keep")
    scans = await asyncio.gather(*(_scan(service, code=record.serial_number) for _ in range(20)))
    accepted = [scan for scan in scans if scan.result == "accepted"]
    assert len(accepted) == 3
    assert sorted(scan.redemption_count for scan in accepted) == [1, 2, 3]
    assert {scan.reason for scan in scans if scan.result == "rejected"} == {"already_redeemed"}
    stored = await repo.pass_(record.account_id, "test", record.id)
    assert stored is not None
    assert stored.redemption_count == 3
    assert await _events(repo, "tessera.events.pass.redeemed") == 3


async def test_a_pass_update_read_before_a_scan_does_not_undo_its_count(
    service: IssuerService, repo: IssuerRepository
) -> None:
    _, record = await _issue(service, max_redemptions=5)
    update = UpdatePass(**command_base(), pass_id=record.id, field_values={"gate": "B"})
    # Both start from the same read of the pass; whichever commits second must keep the count.
    await asyncio.gather(service.handle(update), _scan(service, pass_id=record.id))
    stored = await repo.pass_(record.account_id, "test", record.id)
    assert stored is not None
    assert (stored.redemption_count, stored.field_values["gate"]) == (1, "B")


async def test_a_policy_change_reaches_the_passes_and_the_next_decision(
    service: IssuerService, repo: IssuerRepository
) -> None:
    template, record = await _issue(service)
    await _scan(service, pass_id=record.id)
    change = UpdateTemplate(
        **command_base(), template_id=template.id, redemption={"max_redemptions": 2}
    )
    updated = await service.handle(change)
    assert isinstance(updated, TemplateRecord)
    assert updated.policy().max_redemptions == 2
    stored = await repo.pass_(record.account_id, "test", record.id)
    assert stored is not None
    assert stored.redemption_limit == 2
    assert (await _scan(service, pass_id=record.id)).result == "accepted"
    archived = UpdateTemplate(**command_base(), template_id=template.id, archived=True)
    await service.handle(archived)
    # Archived: decided as before (here the limit is reached).
    assert (await _scan(service, pass_id=record.id)).reason == "already_redeemed"


async def test_a_pass_changed_after_its_limit_was_lowered_below_its_count_renders_as_used(
    service: IssuerService, repo: IssuerRepository
) -> None:
    """The lowered limit's job (not run here) is not the only way there: any rebuild of a pass
    redeemed as often as its template now allows renders it used; one redeemed less is not."""
    template, record = await _issue(service, max_redemptions=3)
    await _scan(service, pass_id=record.id)
    await _scan(service, pass_id=record.id)
    lower = UpdateTemplate(
        **command_base(), template_id=template.id, redemption={"max_redemptions": 2}
    )
    await service.handle(lower)
    jobs = [job async for job in repo.db["jobs"].find({"template_id": template.id})]
    assert [(job["type"], job["total"], job["params"]) for job in jobs] == [
        ("update_passes", 1, {"mark_used": True})
    ]
    other = await service.handle(
        CreatePass(**command_base(), template_id=template.id, holder_name="Grace")
    )
    assert isinstance(other, PassRecord)
    for pass_id in (record.id, other.id):
        await service.handle(UpdatePass(**command_base(), pass_id=pass_id, metadata={"n": "1"}))

    stored = await repo.pass_(record.account_id, "test", record.id)
    assert stored is not None
    assert (stored.used_up, stored.voided) == (True, False)
    file = await repo.pass_files.find_one({"_id": record.id})
    assert file is not None
    assert json.loads(file["pass_json"])["voided"] is True
    fresh = await repo.pass_(record.account_id, "test", other.id)
    assert fresh is not None
    assert not fresh.used_up


async def test_a_pass_past_its_own_expiration_date_is_expired_at_the_door(
    service: IssuerService, repo: IssuerRepository
) -> None:
    """Wallet shows the pass expired after its metadata.expiration_date (or its design's):
    the door says so too."""
    _, record = await _issue(service, max_redemptions=None)
    past = {"expiration_date": "2020-01-01T00:00:00Z"}
    await service.handle(UpdatePass(**command_base(), pass_id=record.id, metadata=past))
    scan = await _scan(service, pass_id=record.id)
    assert (scan.result, scan.reason) == ("rejected", "expired")
    future = {"expiration_date": "2099-01-01T00:00:00Z"}
    await service.handle(UpdatePass(**command_base(), pass_id=record.id, metadata=future))
    assert (await _scan(service, pass_id=record.id)).result == "accepted"


async def test_the_last_scan_of_a_pass_whose_template_images_cannot_be_used_still_admits(
    service: IssuerService, repo: IssuerRepository
) -> None:
    """A template saved before images were cleaned, with one Wallet cannot use: the pass
    cannot be re-rendered as used, but the holder gets in and the scan is counted."""
    template, record = await _issue(service)
    bad = {"logo": b64(png(30, 10)[:33] + png(8, 8)[33:])}  # too few pixels to decode
    await repo.templates.update_one({"_id": template.id}, {"$set": {"design.images": bad}})
    scan = await _scan(service, pass_id=record.id)
    assert (scan.result, scan.redemption_count) == ("accepted", 1)
    stored = await repo.pass_(record.account_id, "test", record.id)
    assert stored is not None
    assert (stored.redemption_count, stored.used_up, stored.version) == (1, False, 1)
    assert (await _scan(service, pass_id=record.id)).reason == "already_redeemed"


async def test_a_rejected_scan_read_before_a_redaction_does_not_commit_after_it(
    service: IssuerService, repo: IssuerRepository, artifacts: WalletArtifacts
) -> None:
    """A rejected scan writes no count, but copies the pass for the scanner: prepared from a
    read that a redaction then made stale, its commit is refused (and its retry reads the
    redacted pass), so no copy of the erased data is stored after the erasure."""
    _, record = await _issue(service)
    await _scan(service, pass_id=record.id)  # used: the next scan is rejected
    redemptions = Redemptions(repo, ScanStore(repo.db), artifacts, SystemClock())
    scan, apply, _ = await redemptions.redeem(RedeemPass(**command_base(), pass_id=record.id))
    assert scan.reason == "already_redeemed"  # type: ignore[attr-defined]
    await service.handle(RedactPass(**command_base(), pass_id=record.id))
    with pytest.raises(ConcurrentUpdate):
        async with repo.unit_of_work() as uow:
            await apply(uow)
    assert await repo.db["scans"].count_documents({"scanned_pass.holder_name": "Ada"}) == 0


async def test_an_accepted_scan_read_before_a_lower_limit_does_not_count_past_it(
    service: IssuerService, repo: IssuerRepository, artifacts: WalletArtifacts
) -> None:
    """A scan prepared under the old limit (5, one used) while the template's update lowers it
    to 1 (its transaction sets the pass's limit): the scan's commit is refused, so it neither
    counts a second redemption past the new limit nor writes the old limit back; its retry
    decides under the new one."""
    template, record = await _issue(service, max_redemptions=5)
    await _scan(service, pass_id=record.id)
    redemptions = Redemptions(repo, ScanStore(repo.db), artifacts, SystemClock())
    scan, apply, _ = await redemptions.redeem(RedeemPass(**command_base(), pass_id=record.id))
    assert scan.result == "accepted"  # type: ignore[attr-defined]
    lower = UpdateTemplate(
        **command_base(), template_id=template.id, redemption={"max_redemptions": 1}
    )
    await service.handle(lower)
    with pytest.raises(ConcurrentUpdate):
        async with repo.unit_of_work() as uow:
            await apply(uow)
    stored = await repo.pass_(record.account_id, "test", record.id)
    assert stored is not None
    assert (stored.redemption_count, stored.redemption_limit) == (1, 1)
    assert (await _scan(service, pass_id=record.id)).reason == "already_redeemed"


async def test_a_scan_read_before_on_limit_turns_to_mark_used_is_decided_again(
    service: IssuerService, repo: IssuerRepository, artifacts: WalletArtifacts
) -> None:
    """A scan prepared under `on_limit: "keep"` that uses a pass's last redemption, while the
    template's update turns `on_limit` to "mark_used" at the same limit: that update lists the
    passes already at the limit to mark used, and this one is not yet. The scan's commit is
    refused (the update set the pass's on_limit), and its retry uses the pass up and marks it,
    so no pass is left used up with its wallet copy still active."""
    template, record = await _issue(service, max_redemptions=2, on_limit="keep")
    await _scan(service, pass_id=record.id)
    redemptions = Redemptions(repo, ScanStore(repo.db), artifacts, SystemClock())
    command = RedeemPass(**command_base(), pass_id=record.id)
    scan, apply, _ = await redemptions.redeem(command)
    assert scan.result == "accepted"  # type: ignore[attr-defined]
    turn = UpdateTemplate(
        **command_base(),
        template_id=template.id,
        redemption={"max_redemptions": 2, "on_limit": "mark_used"},
    )
    await service.handle(turn)
    with pytest.raises(ConcurrentUpdate):
        async with repo.unit_of_work() as uow:
            await apply(uow)
    assert (await _scan(service, pass_id=record.id)).result == "accepted"
    stored = await repo.pass_(record.account_id, "test", record.id)
    assert stored is not None
    assert (stored.redemption_count, stored.used_up) == (2, True)
    assert stored.redemption_on_limit == "mark_used"


async def test_the_last_scan_renders_the_current_design_and_keeps_its_code(
    service: IssuerService, repo: IssuerRepository
) -> None:
    """A pass its rollout had not reached, used up: its file was built from the new design
    while the pass kept the old design_version and code, so the code the wallet showed then
    answered `unknown_code`, and the rollout rebuilt it once more."""
    template, record = await _issue(service)
    design = {**template.design, "barcode": {"format": "qr", "message": "{short_id}"}}
    changed = await service.handle(
        UpdateTemplate(**command_base(), template_id=template.id, design=design)
    )
    assert isinstance(changed, TemplateRecord)
    assert changed.design_version == 2
    assert (await _scan(service, code=record.serial_number)).result == "accepted"
    stored = await repo.pass_(record.account_id, "test", record.id)
    assert stored is not None
    assert stored.used_up
    assert (stored.design_version, stored.barcode_message) == (2, record.short_id)
    again = await _scan(service, code=record.short_id)
    assert (again.result, again.reason) == ("rejected", "already_redeemed")
