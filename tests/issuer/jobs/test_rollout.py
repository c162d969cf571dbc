"""A template rollout against the real store, below NATS, its chunks claimed and run here by
hand: the sweep at its end finds a pass that was made from the old design after the rollout
listed its passes (a POST or an import's chunk racing the PATCH), and the job ends only once
that pass is on the new design; a preparation older than the age bound is never committed."""

import asyncio
from datetime import timedelta

import pytest

from services.issuer.artifacts import WalletArtifacts
from services.issuer.bulk import PassMaker
from services.issuer.jobs import rerender
from services.issuer.jobs.import_passes import ImportPasses
from services.issuer.jobs.reads import JobReads
from services.issuer.jobs.registry import ChunkResult, JobRegistry
from services.issuer.jobs.rerender import PassRerenderer
from services.issuer.jobs.rollout import JOB_TYPE, TemplateRollout
from services.issuer.jobs.store import SWEEP_ITEM, Chunk, JobStore
from services.issuer.jobs.update_passes import JOB_TYPE as UPDATE_PASSES
from services.issuer.jobs.update_passes import UpdatePasses
from services.issuer.jobs.worker import JobWorker
from services.issuer.repository import IssuerRepository
from services.issuer.service import IssuerService
from shared.clock import SystemClock
from shared.errors import InternalError, InvalidRequest
from shared.messages import (
    CancelJob,
    CreatePass,
    CreateUpdatePassesJob,
    JobCanceled,
    UpdatePass,
    UpdateTemplate,
    VoidPass,
)
from shared.models import JobRecord, PassRecord, TemplateRecord
from tests.issuer.jobs.test_worker import _results, _rows, _upload
from tests.support.api import TEMPLATE_BODY
from tests.support.issuer import (
    ACCOUNT,
    claim_chunks,
    command_base,
    job_worker,
    template_command,
)


@pytest.fixture
def service(repo: IssuerRepository, artifacts: WalletArtifacts, store: JobStore) -> IssuerService:
    # The sweep may run at once: the race is made here by hand, not by waiting.
    return IssuerService(
        repo, artifacts, SystemClock(), lambda: None, job_store=store, rollout_sweep_seconds=0
    )


def _rollouts(repo: IssuerRepository, artifacts: WalletArtifacts, store: JobStore) -> JobWorker:
    registry = JobRegistry()
    rerenderer = PassRerenderer(repo, artifacts, SystemClock())
    registry.register(JOB_TYPE, TemplateRollout(rerenderer, repo, store, SystemClock()))
    return job_worker(repo, store, registry)


async def _claim(store: JobStore, later: timedelta = timedelta()) -> list[Chunk]:
    return await claim_chunks(store, later=later)


async def _pass(service: IssuerService, template_id: str) -> PassRecord:
    record = await service.handle(CreatePass(**command_base(), template_id=template_id))
    assert isinstance(record, PassRecord)
    return record


async def _job(store: JobStore, job_id: str) -> JobRecord:
    job = await store.job(ACCOUNT, "test", job_id)
    assert job is not None
    return job


async def test_the_sweep_finds_a_pass_made_from_the_old_design_after_the_listing(
    service: IssuerService, repo: IssuerRepository, artifacts: WalletArtifacts, store: JobStore
) -> None:
    template = await service.handle(template_command())
    assert isinstance(template, TemplateRecord)
    listed = [await _pass(service, template.id) for _ in range(3)]
    moved = {**TEMPLATE_BODY["design"], "description": "Moved to Hall B"}
    patched = await service.handle(
        UpdateTemplate(**command_base(), template_id=template.id, design=moved)
    )
    assert isinstance(patched, TemplateRecord)
    assert patched.design_version == 2
    assert patched.rollout_job_id is not None
    job_id = patched.rollout_job_id
    # A POST that read the template before the PATCH committed, and committed after the
    # rollout listed the template's passes: built from design 1, in no chunk of the job.
    racer = await _pass(service, template.id)
    await repo.passes.update_one({"_id": racer.id}, {"$set": {"design_version": 1}})
    worker = _rollouts(repo, artifacts, store)

    chunks = await _claim(store)
    assert [chunk.items == [SWEEP_ITEM] for chunk in chunks] == [False, True]
    listing, sweep = chunks
    assert sorted(listing.items) == sorted(p.id for p in listed)
    # The sweep waits for the job's other chunks: given back, not done.
    assert await worker.run_chunk(sweep, "test/1") is False
    assert await worker.run_chunk(listing, "test/1") is True
    job = await _job(store, job_id)
    # Every listed pass is done, but the job is not: its sweep is to come.
    assert (job.status, job.processed, job.total) == ("queued", 3, 3)

    [sweep] = await _claim(store, later=timedelta(seconds=2))
    assert sweep.items == [SWEEP_ITEM]
    assert await worker.run_chunk(sweep, "test/1") is True
    job = await _job(store, job_id)
    assert (job.status, job.processed, job.total) == ("queued", 3, 4)  # found one more

    [found] = await _claim(store)
    assert found.items == [racer.id]
    assert await worker.run_chunk(found, "test/1") is True
    job = await _job(store, job_id)
    assert (job.status, job.processed, job.succeeded, job.total) == ("succeeded", 4, 4, 4)
    versions = {doc["_id"]: doc["design_version"] async for doc in repo.passes.find({})}
    assert set(versions.values()) == {2}
    assert await _claim(store, later=timedelta(seconds=5)) == []


async def test_the_sweep_does_not_list_again_a_pass_the_job_did_and_failed(
    service: IssuerService,
    repo: IssuerRepository,
    artifacts: WalletArtifacts,
    store: JobStore,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A pass the rollout failed (its template's images unusable, say) stays on the older
    design; the sweep listed it again, so it was tried twice, counted twice in `total` and
    `failed`, and listed twice in the results."""
    template = await service.handle(template_command())
    assert isinstance(template, TemplateRecord)
    passes = [await _pass(service, template.id) for _ in range(3)]
    moved = {**TEMPLATE_BODY["design"], "description": "Moved to Hall B"}
    patched = await service.handle(
        UpdateTemplate(**command_base(), template_id=template.id, design=moved)
    )
    assert isinstance(patched, TemplateRecord)
    assert patched.rollout_job_id is not None

    def unusable(*_: object) -> None:
        raise ValueError("an image Wallet cannot use")

    monkeypatch.setattr(rerender, "pass_assets", unusable)
    worker = _rollouts(repo, artifacts, store)
    listing, sweep = await _claim(store)
    assert await worker.run_chunk(listing, "test/1") is True
    assert await worker.run_chunk(sweep, "test/1") is True

    job = await _job(store, patched.rollout_job_id)
    assert (job.status, job.processed, job.failed, job.total) == ("failed", 3, 3, 3)
    results = await _results(repo, job.id)
    assert sorted(r.pass_id or "" for r in results) == sorted(p.id for p in passes)
    assert await _claim(store, later=timedelta(seconds=5)) == []


async def test_a_rollout_of_a_template_without_passes_ends_with_its_sweep(
    service: IssuerService, repo: IssuerRepository, artifacts: WalletArtifacts, store: JobStore
) -> None:
    template = await service.handle(template_command())
    assert isinstance(template, TemplateRecord)
    moved = {**TEMPLATE_BODY["design"], "description": "Moved to Hall B"}
    patched = await service.handle(
        UpdateTemplate(**command_base(), template_id=template.id, design=moved)
    )
    assert isinstance(patched, TemplateRecord)
    assert patched.rollout_job_id is not None
    # An import chunk made from design 1 committed after the PATCH.
    racer = await _pass(service, template.id)
    await repo.passes.update_one({"_id": racer.id}, {"$set": {"design_version": 1}})
    worker = _rollouts(repo, artifacts, store)

    [sweep] = await _claim(store)
    assert await worker.run_chunk(sweep, "test/1") is True
    [found] = await _claim(store)
    assert await worker.run_chunk(found, "test/1") is True

    job = await _job(store, patched.rollout_job_id)
    assert (job.status, job.processed, job.total) == ("succeeded", 1, 1)
    doc = await repo.passes.find_one({"_id": racer.id})
    assert doc is not None
    assert doc["design_version"] == 2


async def test_a_command_prepared_longer_ago_than_the_bound_is_never_committed(
    service: IssuerService, repo: IssuerRepository, artifacts: WalletArtifacts, store: JobStore
) -> None:
    template = await service.handle(template_command())
    assert isinstance(template, TemplateRecord)
    strict = IssuerService(
        repo,
        artifacts,
        SystemClock(),
        lambda: None,
        job_store=store,
        conflict_budget_seconds=0.2,
        max_prepared_age_seconds=1e-9,  # every preparation is too old by its commit
    )

    with pytest.raises(InternalError):
        await strict.handle(CreatePass(**command_base(), template_id=template.id))

    assert await repo.passes.count_documents({}) == 0
    assert await repo.processed.count_documents({}) == 1  # the template's command only


class _SlowFirstImport:
    """An import handler whose first preparation outlasts the worker's age bound."""

    def __init__(self, inner: ImportPasses):
        self.inner = inner
        self.runs = 0

    async def run(self, job: JobRecord, chunk: Chunk) -> ChunkResult:
        self.runs += 1
        result = await self.inner.run(job, chunk)
        if self.runs == 1:
            await asyncio.sleep(0.3)  # a preparation that took long (a stalled store, say)
        return result


async def test_a_chunk_prepared_longer_ago_than_the_bound_is_prepared_again(
    service: IssuerService, repo: IssuerRepository, artifacts: WalletArtifacts, store: JobStore
) -> None:
    template = await service.handle(template_command())
    assert isinstance(template, TemplateRecord)
    job = await _upload(service, template.id, [_rows(1, 5)])
    handler = _SlowFirstImport(ImportPasses(PassMaker(repo, artifacts, SystemClock())))
    registry = JobRegistry()
    registry.register("import_passes", handler)
    worker = job_worker(repo, store, registry, max_prepared_age_seconds=0.2)

    [chunk] = await _claim(store)
    assert await worker.run_chunk(chunk, "test/1") is True

    assert handler.runs == 2  # the stale preparation was dropped, not committed
    assert await repo.passes.count_documents({}) == 5
    done = await _job(store, job.id)
    assert (done.status, done.succeeded) == ("succeeded", 5)


async def test_a_superseded_rollouts_results_list_its_passes_and_nothing_for_its_sweep(
    service: IssuerService, repo: IssuerRepository, store: JobStore
) -> None:
    template = await service.handle(template_command())
    assert isinstance(template, TemplateRecord)
    made = [await _pass(service, template.id) for _ in range(2)]
    ids = []
    for description in ("Moved once", "Moved twice"):
        moved = {**TEMPLATE_BODY["design"], "description": description}
        patched = await service.handle(
            UpdateTemplate(**command_base(), template_id=template.id, design=moved)
        )
        assert isinstance(patched, TemplateRecord)
        ids.append(patched.rollout_job_id)

    first = await _job(store, str(ids[0]))
    assert first.status == "canceled"  # superseded by the second
    outcomes = [o async for chunk in JobReads(repo.db).results(first) for o in chunk]
    assert sorted(str(o.pass_id) for o in outcomes) == sorted(p.id for p in made)
    assert all(o.error is not None and o.error.code == "job_canceled" for o in outcomes)


async def test_a_chunk_held_up_past_the_age_bound_is_given_back_not_counted(
    service: IssuerService, repo: IssuerRepository, artifacts: WalletArtifacts, store: JobStore
) -> None:
    """A transaction a killed replica left open holds a pass the chunk replaces: the chunk's
    commit conflicts until its preparation is too old, and the chunk is then given back to be
    prepared afresh, as any held-up commit is, without counting the claim as an attempt."""
    template = await service.handle(template_command())
    assert isinstance(template, TemplateRecord)
    held = await _pass(service, template.id)
    moved = {**TEMPLATE_BODY["design"], "description": "Moved to Hall B"}
    await service.handle(UpdateTemplate(**command_base(), template_id=template.id, design=moved))
    registry = JobRegistry()
    rerenderer = PassRerenderer(repo, artifacts, SystemClock())
    registry.register(JOB_TYPE, TemplateRollout(rerenderer, repo, store, SystemClock()))
    worker = job_worker(repo, store, registry, max_prepared_age_seconds=0.3)
    [chunk, _sweep] = await _claim(store)

    async with repo.db.client.start_session() as session:
        await session.start_transaction()
        await repo.passes.update_one({"_id": held.id}, {"$set": {"x": 1}}, session=session)
        assert await worker.run_chunk(chunk, "test/1") is False
        await session.abort_transaction()

    doc = await store.chunks.find_one({"_id": chunk.id})
    assert doc is not None
    assert (doc["state"], doc["attempts"]) == ("pending", 0)  # given back, not counted
    stored = await repo.passes.find_one({"_id": held.id})
    assert stored is not None
    assert stored["design_version"] == 1  # nothing of the held-up run was committed
    [again] = [c for c in await _claim(store, later=timedelta(seconds=3)) if c.id == chunk.id]
    assert await worker.run_chunk(again, "test/1") is True


async def test_a_sweep_waits_for_its_own_jobs_chunks_only(
    service: IssuerService, repo: IssuerRepository, artifacts: WalletArtifacts, store: JobStore
) -> None:
    """Another job's pending chunks (another template's rollout) do not hold a sweep back."""
    first = await service.handle(template_command())
    other = await service.handle(template_command())
    assert isinstance(first, TemplateRecord)
    assert isinstance(other, TemplateRecord)
    await _pass(service, other.id)
    moved = {**TEMPLATE_BODY["design"], "description": "Moved to Hall B"}
    for template in (first, other):
        await service.handle(
            UpdateTemplate(**command_base(), template_id=template.id, design=moved)
        )
    chunks = await _claim(store)
    [sweep] = [c for c in chunks if c.items == [SWEEP_ITEM] and c.seq == 0]  # `first`: no pass

    assert await _rollouts(repo, artifacts, store).run_chunk(sweep, "test/1") is True


async def test_a_canceled_rollout_gives_no_quota_back(
    service: IssuerService, store: JobStore
) -> None:
    """A rollout's chunks hold pass ids and its sweep, not rows that reserved a unit."""
    template = await service.handle(template_command())
    assert isinstance(template, TemplateRecord)
    for _ in range(2):
        await _pass(service, template.id)
    moved = {**TEMPLATE_BODY["design"], "description": "Moved"}
    patched = await service.handle(
        UpdateTemplate(**command_base(), template_id=template.id, design=moved)
    )
    assert isinstance(patched, TemplateRecord)

    answer = await service.handle(CancelJob(**command_base(), job_id=str(patched.rollout_job_id)))

    assert isinstance(answer, JobCanceled)
    assert (answer.job.status, answer.released) == ("canceled", 0)


async def test_a_pass_voided_while_an_update_job_runs_is_reported_refused_not_changed(
    service: IssuerService, repo: IssuerRepository, artifacts: WalletArtifacts, store: JobStore
) -> None:
    """Listed when the job began, voided before its chunk ran: left as it is, and its result
    says `pass_voided` as a PATCH of it would (it was reported changed, status 200)."""
    registry = JobRegistry()
    registry.register(UPDATE_PASSES, UpdatePasses(PassRerenderer(repo, artifacts, SystemClock())))
    worker = job_worker(repo, store, registry)
    template = await service.handle(template_command())
    assert isinstance(template, TemplateRecord)
    kept, voided = [await _pass(service, template.id) for _ in range(2)]
    job = await service.handle(
        CreateUpdatePassesJob(
            **command_base(), template_id=template.id, field_values={"seat": "K1"}
        )
    )
    assert isinstance(job, JobRecord)
    await service.handle(VoidPass(**command_base(), pass_id=voided.id))
    for chunk in await _claim(store):
        assert await worker.run_chunk(chunk, "test/1")
    done = await _job(store, job.id)
    assert (done.status, done.succeeded, done.failed) == ("succeeded", 1, 1)
    outcomes = {o.pass_id: o for o in await _results(repo, job.id)}
    assert outcomes[kept.id].error is None
    refused = outcomes[voided.id].error
    assert refused is not None
    assert (refused.status, refused.code) == (400, "pass_voided")
    stored = await repo.pass_(ACCOUNT, "test", voided.id)
    assert stored is not None
    assert "seat" not in stored.field_values


async def test_a_pass_whose_values_the_new_barcode_cannot_carry_fails_its_row(
    service: IssuerService,
    repo: IssuerRepository,
    artifacts: WalletArtifacts,
    store: JobStore,
) -> None:
    """QR to Code 128, which carries Latin-1 only: the pass holding "Łukasz" was rebuilt with a
    barcode Wallet cannot draw (the PATCH checked the fixed text alone). It fails its row and
    keeps the version whose barcode works; the others move on."""
    template = await service.handle(template_command())
    assert isinstance(template, TemplateRecord)
    design = {
        **TEMPLATE_BODY["design"],
        "barcode": {"format": "qr", "message": "{field_values.gate}"},
    }
    await service.handle(UpdateTemplate(**command_base(), template_id=template.id, design=design))
    latin = await service.handle(
        CreatePass(**command_base(), template_id=template.id, field_values={"gate": "Lukasz"})
    )
    polish = await service.handle(
        CreatePass(**command_base(), template_id=template.id, field_values={"gate": "Łukasz"})
    )
    assert isinstance(latin, PassRecord)
    assert isinstance(polish, PassRecord)
    code128 = {**design, "barcode": {"format": "code128", "message": "{field_values.gate}"}}
    patched = await service.handle(
        UpdateTemplate(**command_base(), template_id=template.id, design=code128)
    )
    assert isinstance(patched, TemplateRecord)
    assert patched.rollout_job_id is not None
    worker = _rollouts(repo, artifacts, store)
    while chunks := await _claim(store):
        for chunk in chunks:
            await worker.run_chunk(chunk, "test/1")
    job = await _job(store, patched.rollout_job_id)
    assert (job.succeeded, job.failed) == (1, 1)
    [error] = job.errors
    assert (error.pass_id, error.error.param) == (polish.id, "field_values.gate")
    stored = await repo.passes_by_id(ACCOUNT, "test", [latin.id, polish.id])
    assert stored[latin.id].design_version == patched.design_version
    assert stored[polish.id].design_version == polish.design_version
    # An update that would build it from the new design is refused the same way, even one
    # that changes no value its barcode shows: it rebuilt the pass with the undrawable code.
    with pytest.raises(InvalidRequest) as refused:
        await service.handle(
            UpdatePass(**command_base(), pass_id=polish.id, metadata={"note": "x"})
        )
    assert refused.value.param == "field_values.gate"
    fixed = await service.handle(
        UpdatePass(**command_base(), pass_id=polish.id, field_values={"gate": "Lukasz"})
    )
    assert isinstance(fixed, PassRecord)
    assert fixed.design_version == patched.design_version
