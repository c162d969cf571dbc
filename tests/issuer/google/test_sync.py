"""The Google step (services/issuer/google/sync.py) on a real store and the fake Google (real
HTTP): passes marked by their commands are upserted after the commit, a class once per design
version, failures are recorded on the pass and retried, a pass changed meanwhile is synced again.
"""

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from services.issuer.artifacts import WalletArtifacts
from services.issuer.google.sync import GoogleSyncer, GoogleSyncStore
from services.issuer.repository import IssuerRepository
from services.issuer.service import IssuerService
from shared.clock import SystemClock
from shared.messages import CreatePass, UpdatePass, UpdateTemplate
from shared.models import PassRecord, TemplateRecord
from tests.issuer.google.conftest import google_syncer
from tests.support.fake_google import FakeGoogle
from tests.support.issuer import command_base, template_command
from tests.support.polling import poll_async

pytestmark = pytest.mark.asyncio


@pytest.fixture
def service(
    repo: IssuerRepository, synced_artifacts: WalletArtifacts, syncer: GoogleSyncer
) -> IssuerService:
    store = GoogleSyncStore(repo.db)
    return IssuerService(repo, synced_artifacts, SystemClock(), syncer.wake, google_classes=store)


async def _stored(repo: IssuerRepository, pass_id: str) -> dict[str, Any]:
    doc = await repo.passes.find_one({"_id": pass_id})
    assert doc is not None
    return doc


async def _synced(repo: IssuerRepository, pass_id: str, version: int) -> dict[str, Any]:
    async def current() -> dict[str, Any] | None:
        doc = await _stored(repo, pass_id)
        done = doc.get("google_status") == "synced" and doc["version"] == version
        return doc if done else None

    return await poll_async(current, message=f"{pass_id} v{version} synced")


def _class_writes(fake: FakeGoogle) -> list[tuple[str, str]]:
    return [(m, p) for m, p in fake.requests if "Class" in p and m != "GET"]


async def test_a_pass_is_committed_first_and_its_object_upserted_after(
    service: IssuerService, repo: IssuerRepository, fake_google: FakeGoogle
) -> None:
    template = await service.handle(template_command("test"))
    assert isinstance(template, TemplateRecord)
    issued = await service.handle(
        CreatePass(**command_base("test"), template_id=template.id, field_values={})
    )
    assert isinstance(issued, PassRecord)
    assert issued.google_status == "pending"
    doc = await _synced(repo, issued.id, 1)
    assert "google_sync_due" not in doc  # absent: the due index is sparse
    assert "google_lease_owner" not in doc
    assert fake_google.object_of(issued.id)["state"] == "ACTIVE"


async def test_the_class_is_upserted_once_per_design_version(
    service: IssuerService, repo: IssuerRepository, fake_google: FakeGoogle
) -> None:
    template = await service.handle(template_command("test"))
    assert isinstance(template, TemplateRecord)
    for _ in range(3):
        made = await service.handle(
            CreatePass(**command_base("test"), template_id=template.id, field_values={})
        )
        assert isinstance(made, PassRecord)
        await _synced(repo, made.id, 1)
    assert len(_class_writes(fake_google)) == 1
    # A design change reaches the class even when no pass changes in Google.
    design = {**template.design, "description": "Autumn Festival"}
    changed = await service.handle(
        UpdateTemplate(**command_base("test"), template_id=template.id, design=design)
    )
    assert isinstance(changed, TemplateRecord)

    async def class_changed() -> bool:
        return any("Autumn Festival" in str(stored) for stored in fake_google.classes.values())

    await poll_async(class_changed, message="the class updated")
    assert len(_class_writes(fake_google)) == 2


async def test_an_outage_marks_the_pass_failing_and_a_retry_heals_it(
    service: IssuerService, repo: IssuerRepository, fake_google: FakeGoogle
) -> None:
    template = await service.handle(template_command("test"))
    assert isinstance(template, TemplateRecord)
    fake_google.outage_status = 503
    issued = await service.handle(
        CreatePass(**command_base("test"), template_id=template.id, field_values={})
    )
    assert isinstance(issued, PassRecord)

    async def failing() -> dict[str, Any] | None:
        doc = await _stored(repo, issued.id)
        return doc if doc.get("google_attempts", 0) >= 2 else None

    doc = await poll_async(failing, message="two failed attempts")
    assert doc["google_status"] == "failing"
    assert "503" in doc["google_error"]
    fake_google.outage_status = None
    await _synced(repo, issued.id, 1)
    assert "google_attempts" not in await _stored(repo, issued.id)


async def test_a_pass_changed_during_its_sync_is_synced_again_at_its_new_version(
    service: IssuerService, repo: IssuerRepository, fake_google: FakeGoogle
) -> None:
    template = await service.handle(template_command("test"))
    assert isinstance(template, TemplateRecord)
    issued = await service.handle(
        CreatePass(**command_base("test"), template_id=template.id, field_values={})
    )
    assert isinstance(issued, PassRecord)
    for seat in ("A1", "B2", "C3"):
        update = UpdatePass(
            **command_base("test"),
            pass_id=issued.id,
            field_values={"seat": seat},
        )
        await service.handle(update)
    await _synced(repo, issued.id, 4)
    assert "C3" in str(fake_google.object_of(issued.id))


async def test_a_failure_of_an_older_version_leaves_the_newer_one_due(
    repo: IssuerRepository, synced_artifacts: WalletArtifacts
) -> None:
    """A worker's sync of version 1 fails after the pass was voided or redacted (version 2):
    the failure's backoff (up to 300 s) and error went onto version 2, which waited for it.
    Version 2 stays due now, as its command marked it, under no lease."""
    store = GoogleSyncStore(repo.db)
    await store.ensure_indexes()
    service = IssuerService(repo, synced_artifacts, SystemClock(), lambda: None)
    template = await service.handle(template_command("test"))
    assert isinstance(template, TemplateRecord)
    issued = await service.handle(
        CreatePass(**command_base("test"), template_id=template.id, field_values={})
    )
    assert isinstance(issued, PassRecord)
    now = datetime.now(UTC)
    (claimed,) = await store.claim(now, now + timedelta(seconds=60), "worker-1", 10)
    assert claimed.record.version == 1
    await service.handle(
        UpdatePass(**command_base("test"), pass_id=issued.id, field_values={"seat": "Z9"})
    )

    await store.failed(claimed.record, "worker-1", "Google said 503", now + timedelta(seconds=300))

    doc = await _stored(repo, issued.id)
    assert doc["version"] == 2
    assert doc["google_status"] == "pending"
    assert doc["google_sync_due"] <= now + timedelta(seconds=5)
    assert "google_lease_owner" not in doc
    assert doc.get("google_error") is None
    (again,) = await store.claim(datetime.now(UTC), now + timedelta(seconds=60), "worker-2", 10)
    assert again.record.version == 2


async def test_a_step_that_outlasts_half_its_lease_gives_up_and_is_retried(
    repo: IssuerRepository, synced_artifacts: WalletArtifacts, fake_google: FakeGoogle
) -> None:
    """A step with no deadline could still be sending a version when its lease ran out and
    another replica sent a newer one: the older could land at Google last and stay there,
    marked synced. A step now gives up within half its lease, and is tried again."""
    worker = await google_syncer(repo, synced_artifacts, lease_seconds=1.0)
    service = IssuerService(repo, synced_artifacts, SystemClock(), worker.wake)
    template = await service.handle(template_command("test"))
    assert isinstance(template, TemplateRecord)
    fake_google.delay_seconds = 1.0  # every call outlasts the deadline of 0.5 s
    worker.start()
    try:
        issued = await service.handle(
            CreatePass(**command_base("test"), template_id=template.id, field_values={})
        )
        assert isinstance(issued, PassRecord)

        async def failing() -> dict[str, Any] | None:
            doc = await _stored(repo, issued.id)
            return doc if doc.get("google_status") == "failing" else None

        doc = await poll_async(failing, message="the step given up")
        assert doc["google_error"] == "no answer from Google within 0.5 s"
        fake_google.delay_seconds = 0.0
        await _synced(repo, issued.id, 1)
    finally:
        fake_google.delay_seconds = 0.0
        await worker.stop()


async def test_a_class_that_may_have_landed_after_a_newer_design_is_due_again(
    repo: IssuerRepository, synced_artifacts: WalletArtifacts, fake_google: FakeGoogle
) -> None:
    """Class upserts are not leased: a replica sending design 1 while another sends design 2
    could land last, and Google kept design 1 while the store counted 2 as synced. Once a
    class lands, a newer design of its template makes it due again."""
    store = GoogleSyncStore(repo.db)
    worker = await google_syncer(repo, synced_artifacts)
    service = IssuerService(repo, synced_artifacts, SystemClock(), lambda: None)
    first = await service.handle(template_command("test"))
    assert isinstance(first, TemplateRecord)
    design = {**first.design, "description": "Moved to Hall B"}
    second = await service.handle(
        UpdateTemplate(**command_base("test"), template_id=first.id, design=design)
    )
    assert isinstance(second, TemplateRecord)
    await repo.db["google_classes"].delete_many({})  # the design change's own mark, taken

    await worker._upsert_class(first)  # the slower replica's design 1, landing last

    (due,) = await store.classes_due(datetime.now(UTC) + timedelta(seconds=1), 10)
    assert due["_id"] == first.id
    await worker._sync_due_classes()
    assert any("Moved to Hall B" in str(stored) for stored in fake_google.classes.values())


async def test_a_class_synced_under_another_issuer_is_not_taken_as_sent(
    repo: IssuerRepository,
) -> None:
    """An operator moving to another Wallet issuer account: every class counted as at Google
    and never inserted under the new issuer, so every object insert was refused, forever."""
    store = GoogleSyncStore(repo.db)
    await store.class_synced("tmpl_a", "3388000000000000001", 2)
    assert await store.class_version("tmpl_a", "3388000000000000001") == 2
    assert await store.class_version("tmpl_a", "3388000000000000002") == 0
    await store.class_synced("tmpl_a", "3388000000000000002", 1)
    assert await store.class_version("tmpl_a", "3388000000000000002") == 1
    assert await store.class_version("tmpl_a", "3388000000000000001") == 0
    # A design change's class upsert (the `due` path) records its issuer too: the first pass
    # synced after it upserted the class once more.
    await repo.db["google_classes"].insert_one({"_id": "tmpl_due", "due": datetime.now(UTC)})
    due = await repo.db["google_classes"].find_one({"_id": "tmpl_due"})
    assert due is not None
    await store.class_done(due, "3388000000000000001", 4)
    assert await store.class_version("tmpl_due", "3388000000000000001") == 4
    # Recorded before the issuer was (2026-11-28): upserted once more, which changes nothing.
    await repo.db["google_classes"].insert_one({"_id": "tmpl_old", "synced_version": 3})
    assert await store.class_version("tmpl_old", "3388000000000000001") == 0
