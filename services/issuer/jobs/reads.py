"""What the api reads of jobs (through `IssuerReads.jobs`): a job, a page of jobs, and a job's
results chunk by chunk, so that 100,000 rows are streamed, never held at once."""

from collections.abc import AsyncIterator
from typing import Any

from services.issuer.jobs.store import SWEEP_ITEM, JobStore
from shared.models import FINISHED_JOB_STATUSES, JobRecord, JobRowOutcome, RowError
from shared.mongo import Database
from shared.pagination import Page, PageRequest, fetch_page

CANCELED_ROW = RowError(
    status=400,
    type="invalid_request_error",
    code="job_canceled",
    message="The job was canceled before this row was processed.",
)


class JobReads:
    def __init__(self, db: Database):
        self._store = JobStore(db)

    async def job(self, account_id: str, mode: str, job_id: str) -> JobRecord | None:
        return await self._store.job(account_id, mode, job_id)

    async def page(
        self,
        account_id: str,
        mode: str,
        page: PageRequest,
        *,
        job_type: str | None = None,
        template_id: str | None = None,
        status: str | None = None,
    ) -> Page[JobRecord]:
        query: dict[str, Any] = {"account_id": account_id, "mode": mode}
        if job_type is not None:
            query["type"] = job_type
        if template_id is not None:
            query["template_id"] = template_id
        if status == "queued":
            # An import still uploading its rows is queued as far as the client can tell.
            query["status"] = {"$in": ["queued", "uploading"]}
        elif status is not None:
            query["status"] = status
        return await fetch_page(self._store.jobs, query, page, JobRecord.model_validate)

    async def results(self, job: JobRecord) -> AsyncIterator[list[JobRowOutcome]]:
        """The outcomes of the job's rows, a chunk at a time, in row order: done chunks'
        outcomes; the rows of chunks that will never be done (canceled, or left pending by a
        job that finished) with a `job_canceled` error; chunks not done yet are left out (the
        results of a running job are the rows processed so far)."""
        finished = job.status in FINISHED_JOB_STATUSES
        async for doc in self._store.chunks_of(job.id):
            if doc["state"] in ("done", "counting"):
                yield [JobRowOutcome.model_validate(outcome) for outcome in doc["outcomes"]]
            elif doc["state"] == "canceled" or finished:
                items = doc.get("items", [])
                yield [_canceled(item) for item in items if item != SWEEP_ITEM]


def _canceled(item: Any) -> JobRowOutcome:
    if isinstance(item, dict):
        return JobRowOutcome(row=item.get("row"), error=CANCELED_ROW)
    return JobRowOutcome(pass_id=str(item), error=CANCELED_ROW)
