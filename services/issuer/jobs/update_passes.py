"""The `update_passes` job type: field values and metadata set on every non-voided pass of a
template (the gate moved for all tickets), each pass as a PATCH of it would change it: the same
merge (null metadata values remove keys), the same limits on the merged pass (row errors per
pass), the same push and `updated` event, with `metadata.job_id`.

`POST /v1/jobs` sends `CreateUpdatePassesJob`; its command creates the job and its chunks of
pass ids in one transaction (`plan_update`), after the checks that hold for every pass alike
(the template exists, the fields are the template's, the metadata dates parse).

A template PATCH that lowers `max_redemptions` (with `on_limit: "mark_used"`) makes one too, in
its own transaction (`plan_mark_used`), of the passes already redeemed that often: each is
rebuilt as used (`voided: true` in its .pkpass, its Google object COMPLETED) and pushed, as its
last scan would have done (`params.mark_used`; docs/redemption.md).
"""

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from services.issuer.jobs.registry import ChunkResult
from services.issuer.jobs.rerender import Changed, PassRerenderer
from services.issuer.jobs.rollout import CHUNK_PASSES
from services.issuer.jobs.store import Chunk, JobStore
from services.issuer.redemption import at_limit_unmarked
from services.issuer.repository import IssuerRepository, UnitOfWork
from shared.design import Design
from shared.errors import not_found
from shared.ids import new_id
from shared.messages import CreateUpdatePassesJob
from shared.models import JobRecord, PassRecord, TemplateRecord
from shared.pass_values import (
    check_barcode_fits,
    check_field_values,
    check_metadata_dates,
    check_pass_limits,
    merged,
    moves_design,
)

JOB_TYPE = "update_passes"


class UpdatePasses:
    def __init__(self, rerenderer: PassRerenderer):
        self._rerenderer = rerenderer

    async def run(self, job: JobRecord, chunk: Chunk) -> ChunkResult:
        change = _used_at_limit if job.params.get("mark_used") else _with_values
        return await self._rerenderer.run(job, chunk, change)


def _used_at_limit(
    job: JobRecord, template: TemplateRecord, design: Design, record: PassRecord
) -> Changed | None:
    policy = template.policy()
    if not at_limit_unmarked(record, policy):
        return None  # used already (its last scan), or the limit was raised again since
    if moves_design(record, template):  # rebuilt from a newer design: its barcodes must fit
        check_barcode_fits(design, record.field_values)
    return Changed(
        updates={"used_up": True},
        event_metadata={"reason": "redemption_limit", "redemption_limit": policy.max_redemptions},
    )


def _with_values(
    job: JobRecord, template: TemplateRecord, design: Design, record: PassRecord
) -> Changed:
    new_values: dict[str, str | None] = job.params.get("field_values") or {}
    new_metadata: dict[str, Any] = job.params.get("metadata") or {}
    # The design may have changed since the job was created: the values are checked again.
    check_field_values(design, new_values)
    field_values = merged(record.field_values, new_values)
    metadata = merged(record.metadata, new_metadata)
    check_pass_limits(field_values, metadata)
    check_metadata_dates(metadata)
    changed = None if moves_design(record, template) else new_values
    check_barcode_fits(design, field_values, changed=changed)
    return Changed(
        updates={"field_values": field_values, "metadata": metadata},
        event_metadata={"field_values": sorted(new_values), "metadata": sorted(new_metadata)},
    )


async def plan_update(
    repo: IssuerRepository, store: JobStore, cmd: CreateUpdatePassesJob, now: datetime
) -> tuple[JobRecord, Callable[[UnitOfWork], Awaitable[None]]]:
    template = await repo.template(cmd.account_id, cmd.mode, cmd.template_id)
    if template is None:
        raise not_found("template", cmd.template_id, "template_id")
    check_field_values(Design.from_stored(template.design), cmd.field_values or {})
    check_metadata_dates({k: v for k, v in (cmd.metadata or {}).items() if v is not None})
    pass_ids = await repo.live_pass_ids(cmd.account_id, cmd.mode, template.id)
    params = {"field_values": cmd.field_values or {}, "metadata": cmd.metadata or {}}
    return _planned(store, template, pass_ids, params, now)


def plan_mark_used(
    repo: IssuerRepository, store: JobStore, template: TemplateRecord, now: datetime
) -> Callable[[UnitOfWork], Awaitable[None]] | None:
    """The writes, for the PATCH's transaction, of the job that marks used the passes of
    `template` (at its new, lower `max_redemptions`) redeemed that often already; None when its
    policy marks nothing used. The passes are listed in the transaction, after the PATCH set
    their new limit on every pass of the template: a scan that counts one of them and commits
    after that read conflicts with that write and is decided again under the new limit (and,
    reaching it, marks its pass used itself), so none is left out. No pass: no job."""
    policy = template.policy()
    limit = policy.max_redemptions
    if policy.on_limit != "mark_used" or limit is None:
        return None

    async def apply(uow: UnitOfWork) -> None:
        pass_ids = await repo.unmarked_pass_ids_at(
            template.account_id, template.mode, template.id, limit, session=uow.session
        )
        if pass_ids:
            _job, write = _planned(store, template, pass_ids, {"mark_used": True}, now)
            await write(uow)

    return apply


def _planned(
    store: JobStore,
    template: TemplateRecord,
    pass_ids: list[str],
    params: dict[str, Any],
    now: datetime,
) -> tuple[JobRecord, Callable[[UnitOfWork], Awaitable[None]]]:
    empty = not pass_ids
    job = JobRecord.model_validate(
        {
            "_id": new_id("job"),
            "account_id": template.account_id,
            "mode": template.mode,
            "type": JOB_TYPE,
            "status": "succeeded" if empty else "queued",
            "template_id": template.id,
            "total": len(pass_ids),
            "params": params,
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

    async def apply(uow: UnitOfWork) -> None:
        await store.insert_job(uow.session, job)
        await store.insert_chunks(uow.session, job, chunks, "pending", now)

    return job, apply
