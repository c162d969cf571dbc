"""Jobs that re-render passes (a template rollout, an update_passes job) with Google credentials
(services/issuer/jobs/rerender.py, WalletArtifacts.google_object_changed): each pass's Google
object is upserted again exactly when the object the pass now makes differs from the one at
Google, whatever the job changed: a change of the class alone upserts no object, while a
metadata date, a field's default or a design change superseded before it ran reach every
object they change.
"""

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from services.issuer.artifacts import WalletArtifacts
from services.issuer.google.sync import GoogleSyncer, GoogleSyncStore
from services.issuer.jobs.registry import JobRegistry
from services.issuer.jobs.rerender import PassRerenderer
from services.issuer.jobs.rollout import JOB_TYPE as ROLLOUT
from services.issuer.jobs.rollout import TemplateRollout
from services.issuer.jobs.store import SWEEP_ITEM, JobStore
from services.issuer.jobs.update_passes import JOB_TYPE as UPDATE_PASSES
from services.issuer.jobs.update_passes import UpdatePasses
from services.issuer.jobs.worker import JobWorker
from services.issuer.repository import IssuerRepository
from services.issuer.service import IssuerService
from shared.clock import SystemClock
from shared.messages import CreatePass, CreateUpdatePassesJob, UpdateTemplate
from shared.models import JobRecord, PassRecord, TemplateRecord
from tests.support.api import TEMPLATE_BODY
from tests.support.fake_google import FakeGoogle
from tests.support.issuer import ACCOUNT, claim_chunks, command_base, job_worker, template_command
from tests.support.polling import poll_async

pytestmark = pytest.mark.asyncio


@pytest.fixture
async def store(repo: IssuerRepository) -> JobStore:
    jobs = JobStore(repo.db)
    await jobs.ensure_indexes()
    return jobs


@pytest.fixture
def service(
    repo: IssuerRepository, synced_artifacts: WalletArtifacts, syncer: GoogleSyncer, store: JobStore
) -> IssuerService:
    return IssuerService(
        repo,
        synced_artifacts,
        SystemClock(),
        syncer.wake,
        google_classes=GoogleSyncStore(repo.db),
        job_store=store,
        rollout_sweep_seconds=0,
    )


@dataclass
class Rig:
    """An issuer with Google credentials, its job worker (its chunks run by hand) and the fake
    Google."""

    service: IssuerService
    repo: IssuerRepository
    worker: JobWorker
    store: JobStore
    fake_google: FakeGoogle

    def __iter__(self) -> Iterator[Any]:
        return iter((self.service, self.repo, self.worker, self.store, self.fake_google))


@pytest.fixture
def rig(
    service: IssuerService,
    repo: IssuerRepository,
    worker: JobWorker,
    store: JobStore,
    fake_google: FakeGoogle,
) -> Rig:
    return Rig(service, repo, worker, store, fake_google)


@pytest.fixture
def worker(repo: IssuerRepository, synced_artifacts: WalletArtifacts, store: JobStore) -> JobWorker:
    registry = JobRegistry()
    rerenderer = PassRerenderer(repo, synced_artifacts, SystemClock())
    registry.register(ROLLOUT, TemplateRollout(rerenderer, repo, store, SystemClock()))
    registry.register(UPDATE_PASSES, UpdatePasses(rerenderer))
    return job_worker(repo, store, registry)


async def _issued(
    service: IssuerService, repo: IssuerRepository
) -> tuple[TemplateRecord, list[PassRecord]]:
    """A template and three passes of it, each synced to Google."""
    template = await service.handle(template_command())
    assert isinstance(template, TemplateRecord)
    passes = []
    for seat in ("A1", "B2", None):
        values = {"gate": "North", **({"seat": seat} if seat else {})}
        made = await service.handle(
            CreatePass(**command_base(), template_id=template.id, field_values=values)
        )
        assert isinstance(made, PassRecord)
        passes.append(made)
    await _all_synced(repo, template.id)
    return template, passes


async def _all_synced(repo: IssuerRepository, template_id: str) -> list[dict[str, Any]]:
    async def synced() -> list[dict[str, Any]] | None:
        docs = [doc async for doc in repo.passes.find({"template_id": template_id})]
        done = all(doc.get("google_status") == "synced" for doc in docs)
        return docs if done else None

    return await poll_async(synced, message="every pass synced to Google")


async def _run_job(worker: JobWorker, store: JobStore, job_id: str) -> JobRecord:
    """Every chunk there is to run, run here, each job's sweep after its other chunks."""
    while chunks := await claim_chunks(store):
        for chunk in sorted(chunks, key=lambda claimed: claimed.items == [SWEEP_ITEM]):
            assert await worker.run_chunk(chunk, "test/1") is True
    job = await store.job(ACCOUNT, "test", job_id)
    assert job is not None
    assert job.status == "succeeded", job
    return job


def _object_writes(fake: FakeGoogle) -> int:
    return sum(1 for method, path in fake.requests if "Object" in path and method != "GET")


async def _patch_design(service: IssuerService, template_id: str, **changes: Any) -> TemplateRecord:
    current = await service.handle(
        UpdateTemplate(**command_base(), template_id=template_id, name="Concert")
    )
    assert isinstance(current, TemplateRecord)
    patched = await service.handle(
        UpdateTemplate(
            **command_base(), template_id=template_id, design={**current.design, **changes}
        )
    )
    assert isinstance(patched, TemplateRecord)
    assert patched.rollout_job_id is not None
    return patched


async def test_a_rollout_of_a_class_change_upserts_no_object(rig: Rig) -> None:
    service, repo, worker, store, fake_google = rig
    template, _passes = await _issued(service, repo)
    before = _object_writes(fake_google)
    colors = {"background": "#000000", "foreground": "#FFFFFF", "label": "#C0C0C0"}
    patched = await _patch_design(service, template.id, colors=colors)
    await _run_job(worker, store, patched.rollout_job_id or "")
    docs = await _all_synced(repo, template.id)
    assert {doc["design_version"] for doc in docs} == {2}
    assert _object_writes(fake_google) == before


async def test_a_changed_default_reaches_only_the_objects_that_show_it(rig: Rig) -> None:
    service, repo, worker, store, fake_google = rig
    template, passes = await _issued(service, repo)
    before = _object_writes(fake_google)
    fields = [dict(field) for field in TEMPLATE_BODY["design"]["fields"]]
    fields[0]["default"] = "Standing"
    patched = await _patch_design(service, template.id, fields=fields)
    await _run_job(worker, store, patched.rollout_job_id or "")
    await _all_synced(repo, template.id)
    # Only the pass without a seat of its own shows the default.
    assert _object_writes(fake_google) == before + 1
    assert "Standing" in str(fake_google.object_of(passes[2].id))
    assert "Standing" not in str(fake_google.object_of(passes[0].id))


async def test_a_rollout_superseded_before_it_ran_still_reaches_the_objects(rig: Rig) -> None:
    """A label change (it reaches the objects), then a colour change (the class alone) before
    the first rollout ran: the second rollout builds every pass, and their objects too."""
    service, repo, worker, store, fake_google = rig
    template, passes = await _issued(service, repo)
    fields = [dict(field) for field in TEMPLATE_BODY["design"]["fields"]]
    fields[1]["label"] = "Door"
    await _patch_design(service, template.id, fields=fields)
    colors = {"background": "#000000", "foreground": "#FFFFFF", "label": "#C0C0C0"}
    latest = await _patch_design(service, template.id, colors=colors)
    await _run_job(worker, store, latest.rollout_job_id or "")
    docs = await _all_synced(repo, template.id)
    assert {doc["design_version"] for doc in docs} == {3}
    for made in passes:
        assert "Door" in str(fake_google.object_of(made.id))


async def test_an_update_of_a_metadata_date_alone_reaches_the_objects(rig: Rig) -> None:
    service, repo, worker, store, fake_google = rig
    template, passes = await _issued(service, repo)
    job = await service.handle(
        CreateUpdatePassesJob(
            **command_base(),
            template_id=template.id,
            metadata={"expiration_date": "2031-12-31T23:59:00+01:00"},
        )
    )
    assert isinstance(job, JobRecord)
    await _run_job(worker, store, job.id)
    await _all_synced(repo, template.id)
    for made in passes:
        interval = fake_google.object_of(made.id)["validTimeInterval"]
        assert interval["end"]["date"].startswith("2031-12-31T23:59:00")
