"""The `import_passes` job type: each chunk's rows become passes, as POST /v1/passes/batch
makes them (services/issuer/bulk.py). A row is made once: its chunk commits once (the worker's
guarded commit)."""

from services.issuer.bulk import PassMaker, Prepared
from services.issuer.jobs.registry import ChunkResult
from services.issuer.jobs.store import Chunk
from shared.errors import ApiError
from shared.messages import ImportRow
from shared.models import JobRecord, JobRowOutcome, row_error

JOB_TYPE = "import_passes"


class ImportPasses:
    def __init__(self, maker: PassMaker):
        self._maker = maker

    async def run(self, job: JobRecord, chunk: Chunk) -> ChunkResult:
        rows = [ImportRow.model_validate(item) for item in chunk.items]
        outcomes: dict[int, JobRowOutcome] = {}
        todo: list[ImportRow] = []
        for row in rows:
            if row.error is not None:  # refused by the api already
                outcomes[row.row] = JobRowOutcome(row=row.row, error=row.error)
            else:
                todo.append(row)
        prepared = Prepared(passes=[], errors={})
        if todo:
            try:
                template = await self._maker.template(
                    job.account_id, job.mode, job.template_id or ""
                )
            except ApiError as exc:
                if exc.status >= 500:
                    raise
                # Archived since the job was created, say: every row answers as POST would.
                prepared.errors = {row.row: row_error(exc) for row in todo}
            else:
                prepared = await self._maker.prepare(
                    template,
                    [(row.row, row) for row in todo],
                    account_id=job.account_id,
                    mode=job.mode,
                )
        for number, error in prepared.errors.items():
            outcomes[number] = JobRowOutcome(row=number, error=error)
        for made in prepared.passes:
            outcomes[made.key] = JobRowOutcome(
                row=made.key, pass_id=made.record.id, short_id=made.record.short_id
            )
        return ChunkResult(
            outcomes=[outcomes[row.row] for row in rows],
            write=prepared.write,
            events=[made.event for made in prepared.passes],
        )
