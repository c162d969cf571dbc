"""The `template_rollout` job type: a PATCH that changes a template's design re-renders every
non-voided pass of the template with it (issue 12, section 3).

The PATCH's own command creates the job in its transaction (`plan_rollout`): the template's
`design_version` goes up by one, the pass ids become chunks of 100, and the template's
previous rollout, if it is still running, is superseded (canceled, `params.superseded_by`):
its passes are all in the new job, which renders them with the newer design anyway. A chunk
renders each pass with the template's current design and skips the passes already at its
design_version (made or updated since), so none is built twice for nothing.
"""

from collections.abc import Awaitable, Callable
from datetime import datetime

from services.issuer.jobs.registry import ChunkResult
from services.issuer.jobs.rerender import Changed, PassRerenderer
from services.issuer.jobs.store import Chunk, JobStore
from services.issuer.repository import IssuerRepository, UnitOfWork
from shared.design import Design
from shared.ids import new_id
from shared.models import JobRecord, PassRecord, TemplateRecord

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
) -> tuple[JobRecord, Callable[[UnitOfWork], Awaitable[None]]]:
    """The rollout job of `after` (the template at its new design_version) and its writes,
    for the PATCH's transaction: the job, its chunks, the previous rollout superseded."""
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
        if previous is not None:
            await store.supersede(uow.session, previous, job.id, now)
        await store.insert_job(uow.session, job)
        await store.insert_chunks(uow.session, job, chunks, "pending", now)

    return job, apply
