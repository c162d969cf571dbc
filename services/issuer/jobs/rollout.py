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
"""

import logging
from collections.abc import Awaitable, Callable
from datetime import datetime

from services.issuer.jobs.registry import ChunkResult
from services.issuer.jobs.rerender import Changed, PassRerenderer
from services.issuer.jobs.store import Chunk, JobStore
from services.issuer.repository import IssuerRepository, UnitOfWork
from shared.design import Design
from shared.ids import new_id
from shared.models import JobRecord, PassRecord, TemplateRecord

log = logging.getLogger(__name__)

JOB_TYPE = "template_rollout"
CHUNK_PASSES = 100


class TemplateRollout:
    def __init__(self, rerenderer: PassRerenderer):
        self._rerenderer = rerenderer

    async def run(self, job: JobRecord, chunk: Chunk) -> ChunkResult:
        return await self._rerenderer.run(job, chunk, _to_current_design)


def _to_current_design(
    job: JobRecord, template: TemplateRecord, design: Design, record: PassRecord
) -> Changed | None:
    if template.design_version > job.params.get("design_version", template.design_version):
        return None  # superseded: a newer rollout builds this pass with the newer design
    if record.design_version >= template.design_version:
        return None  # built from this design already (created or updated since the change)
    return Changed(
        updates={},
        event_metadata={"design_version": template.design_version},
        google_object=bool(job.params.get("google_objects", True)),
    )


async def plan_rollout(
    repo: IssuerRepository,
    store: JobStore,
    before: TemplateRecord,
    after: TemplateRecord,
    now: datetime,
    *,
    google_objects: bool,
) -> tuple[JobRecord, Callable[[UnitOfWork], Awaitable[None]], Callable[[], Awaitable[None]]]:
    """The rollout job of `after` (the template at its new design_version), its writes for the
    PATCH's transaction (the job, its chunks), and what to do once that committed (the
    previous rollout superseded)."""
    pass_ids = await repo.live_pass_ids(after.account_id, after.mode, after.id)
    empty = not pass_ids
    job = JobRecord.model_validate(
        {
            "_id": new_id("job"),
            "account_id": after.account_id,
            "mode": after.mode,
            "type": JOB_TYPE,
            # Nothing to roll out: done at once (no chunk would ever finish it).
            "status": "succeeded" if empty else "queued",
            "template_id": after.id,
            "total": len(pass_ids),
            "params": {"design_version": after.design_version, "google_objects": google_objects},
            "created_at": now,
            "updated_at": now,
            "started_at": now if empty else None,
            "finished_at": now if empty else None,
        }
    )
    chunks = [
        (seq, pass_ids[start : start + CHUNK_PASSES])
        for seq, start in enumerate(range(0, len(pass_ids), CHUNK_PASSES))
    ]
    previous = before.rollout_job_id

    async def apply(uow: UnitOfWork) -> None:
        await store.insert_job(uow.session, job)
        await store.insert_chunks(uow.session, job, chunks, "pending", now)

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
