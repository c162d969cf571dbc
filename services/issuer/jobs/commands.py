"""The job commands of the issuer: an import's upload (`AddImportRows`, then `StartJob`) and
`CancelJob`. Each is prepared from reads and returns its result and its writes, which
IssuerService commits in one transaction with the command's processed marker, as it does every
command (so each is idempotent by its command id)."""

from collections.abc import Awaitable, Callable

from services.issuer.bulk import PassMaker
from services.issuer.jobs.import_passes import JOB_TYPE as IMPORT_PASSES
from services.issuer.jobs.store import JobStore
from services.issuer.repository import ConcurrentUpdate, UnitOfWork
from shared.clock import Clock
from shared.errors import InvalidRequest, not_found
from shared.messages import AddImportRows, CancelJob, JobCanceled, StartJob
from shared.models import FINISHED_JOB_STATUSES, JobRecord

Apply = Callable[[UnitOfWork], Awaitable[None]]


async def _nothing(uow: UnitOfWork) -> None:
    return None


class JobCommands:
    def __init__(self, store: JobStore, maker: PassMaker, clock: Clock):
        self._store = store
        self._maker = maker
        self._clock = clock

    async def _job(self, cmd: StartJob | CancelJob | AddImportRows) -> JobRecord | None:
        return await self._store.job(cmd.account_id, cmd.mode, cmd.job_id)

    async def add_import_rows(self, cmd: AddImportRows) -> tuple[JobRecord, Apply]:
        existing = await self._job(cmd)
        if existing is None:
            # Answers as POST /v1/passes does for a template that is unknown, archived or not
            # issuable in this mode, before the job exists. Once it exists, its upload goes on
            # (a template archived meanwhile fails the rows when they run, as in a started job).
            await self._maker.template(cmd.account_id, cmd.mode, cmd.template_id)
        elif existing.status != "uploading":
            raise InvalidRequest(
                f"Job '{cmd.job_id}' is {existing.status}; its rows can no longer change.",
                code="job_upload_closed",
            )
        now = self._clock.now()
        record = existing or JobRecord.model_validate(
            {
                "_id": cmd.job_id,
                "account_id": cmd.account_id,
                "mode": cmd.mode,
                "type": IMPORT_PASSES,
                "status": "uploading",
                "template_id": cmd.template_id,
                "reserved": cmd.reserved,
                "reserved_at": cmd.reserved_at,
                "created_at": now,
                "updated_at": now,
            }
        )
        chunks = [
            (chunk.seq, [row.model_dump(mode="json", exclude_none=True) for row in chunk.rows])
            for chunk in cmd.chunks
        ]

        async def apply(uow: UnitOfWork) -> None:
            job = await self._store.open_upload(uow.session, record)
            if job.status != "uploading" or (job.account_id, job.mode) != (
                cmd.account_id,
                cmd.mode,
            ):
                raise ConcurrentUpdate(cmd.job_id)  # prepared again: answers why
            await self._store.insert_chunks(uow.session, job, chunks, "waiting", now)

        return record, apply

    async def start(self, cmd: StartJob) -> tuple[JobRecord, Apply]:
        job = await self._job(cmd)
        if job is None:
            raise not_found("job", cmd.job_id)
        if job.status != "uploading":
            return job, _nothing  # started already (a replay, or a retried request)
        now = self._clock.now()
        started = job.model_copy(update={"status": "queued", "total": cmd.total, "updated_at": now})

        async def apply(uow: UnitOfWork) -> None:
            if not await self._store.start(uow.session, job.id, cmd.total, now):
                raise ConcurrentUpdate(job.id)

        return started, apply

    async def cancel(self, cmd: CancelJob) -> tuple[JobCanceled, Apply]:
        job = await self._job(cmd)
        if job is None:
            raise not_found("job", cmd.job_id)
        if job.status in FINISHED_JOB_STATUSES:
            # Canceling a finished job changes nothing, and gives nothing back twice.
            return JobCanceled(job=job), _nothing
        now = self._clock.now()
        canceled = JobCanceled(
            job=job.model_copy(update={"status": "canceled", "finished_at": now, "updated_at": now})
        )

        async def apply(uow: UnitOfWork) -> None:
            unrun = await self._store.cancel(uow.session, job.id, job.status, now)
            if unrun is None:
                raise ConcurrentUpdate(job.id)
            if job.type == "import_passes":  # the others reserve nothing
                canceled.released = min(unrun, job.reserved)

        return canceled, apply
