"""The `template_rollout` job type: a PATCH that changes a template's design re-renders every
non-voided pass of the template with it (issue 12, section 3).

The PATCH's own command creates the job in its transaction (`plan_rollout`): the template's
`design_version` goes up by one and the pass ids become chunks of 100. Once that committed, the
template's previous rollout, if it is still running, is superseded (canceled,
`params.superseded_by`): its passes are all in the new job. Superseding is not part of the
PATCH's transaction, because it writes what the running rollout's chunk commits write (its job's
counters, its chunks) and would lose write conflicts to them for as long as it runs; a chunk of
a job whose design_version is no longer the template's changes nothing, so until the cancel
lands the older job builds nothing the newer one would build again. A chunk renders each pass
with the template's current design and skips the passes already at its design_version (made or
updated since), so none is built twice for nothing.

The pass ids are listed before the PATCH commits, so a pass that was being made from the old
design meanwhile (a POST, a batch, an import's chunk) can be missing from them. So every rollout
ends with a sweep: a last chunk, claimed no earlier than `sweep_at` (the issuer's
`rollout_sweep_seconds` after the change) and only once the job's other chunks are done, looks
for the template's passes still on an older design and adds chunks for them (the job's `total`
grows by as many). Nothing made from the old design can commit after the sweep looked: a command
or chunk prepared more than `max_prepared_age_seconds` before its commit is prepared again, from
the new design (docs/templates.md#passes-made-while-the-design-changes).
"""

import logging
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from services.issuer.jobs.registry import ChunkResult, NotYet
from services.issuer.jobs.rerender import Changed, PassRerenderer
from services.issuer.jobs.store import SWEEP_ITEM, Chunk, JobStore
from services.issuer.repository import IssuerRepository, UnitOfWork
from shared.clock import Clock
from shared.design import Design
from shared.ids import new_id
from shared.models import JobRecord, PassRecord, TemplateRecord
from shared.pass_values import check_barcode_fits

log = logging.getLogger(__name__)

JOB_TYPE = "template_rollout"
CHUNK_PASSES = 100


# How often a sweep whose job still has chunks to do looks again.
SWEEP_RECHECK_SECONDS = 1.0


class TemplateRollout:
    def __init__(
        self, rerenderer: PassRerenderer, repo: IssuerRepository, store: JobStore, clock: Clock
    ):
        self._rerenderer = rerenderer
        self._repo = repo
        self._store = store
        self._clock = clock

    async def run(self, job: JobRecord, chunk: Chunk) -> ChunkResult:
        if chunk.items == [SWEEP_ITEM]:
            return await self._sweep(job, chunk)
        return await self._rerenderer.run(job, chunk, _to_current_design)

    async def _sweep(self, job: JobRecord, chunk: Chunk) -> ChunkResult:
        """Chunks for the template's passes still on an older design, once the job's other
        chunks are done (they would be found again otherwise)."""
        if await self._store.others_open(job.id, chunk.id):
            raise NotYet(SWEEP_RECHECK_SECONDS)
        version = int(job.params.get("design_version", 0))
        template = await self._repo.template(job.account_id, job.mode, job.template_id or "")
        if template is None or template.design_version > version:
            return ChunkResult(outcomes=[])  # superseded: the newer rollout sweeps
        found = await self._repo.stale_pass_ids(job.account_id, job.mode, template.id, version)
        # A pass the job did and left on the older design (it failed: the new design cannot
        # show its values, say) is in the results once, not a second time by the sweep.
        done = await self._store.passes_done(job.id) if found else set()
        stale = [pass_id for pass_id in found if pass_id not in done]
        if not stale:
            return ChunkResult(outcomes=[])
        log.info("rollout %s: %d passes made from an older design found", job.id, len(stale))
        chunks = _chunks(stale, first_seq=chunk.seq + 1)
        now = self._clock.now()

        async def write(uow: UnitOfWork) -> None:
            await self._store.insert_chunks(uow.session, job, chunks, "pending", now)
            await self._store.grow(uow.session, job.id, len(stale))

        return ChunkResult(outcomes=[], write=write)


def _chunks(pass_ids: list[str], first_seq: int = 0) -> list[tuple[int, list[Any]]]:
    return [
        (first_seq + n, pass_ids[start : start + CHUNK_PASSES])
        for n, start in enumerate(range(0, len(pass_ids), CHUNK_PASSES))
    ]


def _to_current_design(
    job: JobRecord, template: TemplateRecord, design: Design, record: PassRecord
) -> Changed | None:
    if template.design_version > job.params.get("design_version", template.design_version):
        return None  # superseded: a newer rollout builds this pass with the newer design
    if record.design_version >= template.design_version:
        return None  # built from this design already (created or updated since the change)
    # A new barcode format or message may not carry this pass's values (Code 128 takes Latin-1
    # only, PDF417 about 1,000 bytes): the pass fails its row, keeping its working version,
    # rather than get a barcode Wallet leaves blank (the PATCH checked the message alone).
    check_barcode_fits(design, record.field_values)
    return Changed(
        updates={},
        event_metadata={"design_version": template.design_version},
    )


async def plan_rollout(
    repo: IssuerRepository,
    store: JobStore,
    before: TemplateRecord,
    after: TemplateRecord,
    now: datetime,
    *,
    sweep_at: datetime,
) -> tuple[JobRecord, Callable[[UnitOfWork], Awaitable[None]], Callable[[], Awaitable[None]]]:
    """The rollout job of `after` (the template at its new design_version), its writes for the
    PATCH's transaction (the job, its chunks, its sweep from `sweep_at`), and what to do once
    that committed (the previous rollout superseded)."""
    pass_ids = await repo.live_pass_ids(after.account_id, after.mode, after.id)
    job = JobRecord.model_validate(
        {
            "_id": new_id("job"),
            "account_id": after.account_id,
            "mode": after.mode,
            "type": JOB_TYPE,
            # Even with no pass yet: passes being made meanwhile are found by its sweep.
            "status": "queued",
            "template_id": after.id,
            "total": len(pass_ids),
            "params": {"design_version": after.design_version},
            "created_at": now,
            "updated_at": now,
        }
    )
    chunks = _chunks(pass_ids)
    sweep = [(len(chunks), [SWEEP_ITEM])]
    previous = before.rollout_job_id

    async def apply(uow: UnitOfWork) -> None:
        await store.insert_job(uow.session, job)
        await store.insert_chunks(uow.session, job, chunks, "pending", now)
        await store.insert_chunks(uow.session, job, sweep, "pending", now, not_before=sweep_at)

    async def supersede() -> None:
        if previous is None:
            return
        try:
            # Outside any transaction: the store serialises these writes with the running
            # job's chunk commits instead of failing either on a write conflict.
            await store.supersede(None, previous, job.id, now)
        except Exception:
            # The PATCH committed; the older job only builds nothing more (see above).
            log.exception("rollout %s not marked superseded by %s", previous, job.id)

    return job, apply, supersede
