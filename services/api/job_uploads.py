"""Creating an import job: check every row, reserve the quota, send the rows to the issuer in
commands NATS can carry, then start the job (docs/architecture.md#jobs).

Rows are checked here as POST /v1/passes checks a body (the same models, so the same `param`s),
and against the template's fields; a bad row, or a row past the quota, is sent with its error
and fails alone in the job. Every command's id is derived from the request's command id, and
the job's id from it too, so a request retried with the same Idempotency-Key re-sends the same
commands: what the issuer stored already answers from its processed markers, and the upload
resumes where it stopped.
"""

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from services.api.accounts import Principal
from services.api.deps import ApiContext
from services.api.endpoints.common import command_base
from services.api.errors import validation_error
from services.api.limits import quota_exhausted
from services.api.row_units import RowUnits
from services.api.schemas import ImportRowCreate, PassCreate
from shared.design import Design
from shared.errors import ApiError, InvalidRequest, not_found
from shared.ids import has_prefix, new_id
from shared.messages import AddImportRows, ImportChunk, ImportRow, StartJob
from shared.models import JobRecord, RowError, TemplateRecord, row_error
from shared.nats import COMMAND_HEADROOM_BYTES, max_payload
from shared.pass_values import check_pass_values

# Rows in one chunk of work (what one issuer replica does in one transaction).
CHUNK_ROWS = 200
# Rows a command carries at most, in bytes of JSON: within NATS's 1 MiB with room to spare.
COMMAND_BYTES = 512 * 1024
# What JSON adds around a chunk's rows in a command.
CHUNK_OVERHEAD_BYTES = 64


def checked(
    body: Any, model: type[PassCreate] | type[ImportRowCreate]
) -> dict[str, Any] | RowError:
    """A row validated as `model` (the JSON of its fields), or its error as the api would
    answer that body alone."""
    try:
        return model.model_validate(body).model_dump(mode="json")
    except ValidationError as exc:
        return row_error(validation_error(RequestValidationError(exc.errors())))
    except ApiError as exc:  # the body checks raise the API error itself
        return row_error(exc)


def row_refusal(design: Design, data: dict[str, Any]) -> RowError | None:
    """What the issuer will refuse of the row's values (shared/pass_values.py), found before
    upload: the row fails with its number and takes no unit of the quota."""
    try:
        check_pass_values(design, data["field_values"], data["metadata"])
    except InvalidRequest as exc:
        return row_error(exc)
    return None


def issuable_template(template: TemplateRecord | None, template_id: str) -> TemplateRecord:
    """Answers as POST /v1/passes does for an unknown (or another account's) or archived one."""
    if template is None:
        raise not_found("template", template_id, "template_id")
    if template.archived:
        raise InvalidRequest(
            f"Template '{template.id}' is archived; no new passes can be issued from it.",
            param="template_id",
            code="template_archived",
        )
    return template


def checked_rows(bodies: Iterable[Any]) -> list[dict[str, Any] | RowError]:
    """Each body checked as an import row (a `RowError` is a record the CSV reader refused)."""
    return [
        body if isinstance(body, RowError) else checked(body, ImportRowCreate) for body in bodies
    ]


def import_rows(bodies: Sequence[dict[str, Any] | RowError], design: Design) -> list[ImportRow]:
    """Each checked body (`checked_rows`) checked against the design; rows count from 1."""
    rows = []
    for number, data in enumerate(bodies, start=1):
        if isinstance(data, RowError):
            rows.append(ImportRow(row=number, error=data))
            continue
        error = row_refusal(design, data)
        rows.append(ImportRow(row=number, error=error) if error else ImportRow(row=number, **data))
    return rows


def job_id_for(command_id: str) -> str:
    """The job a request makes: derived from its command id, so a retry names the same job
    (and sorts by time as every id does: a command id's body is a time-sortable id)."""
    if has_prefix(command_id, "command"):
        return "job_" + command_id.removeprefix("cmd_")
    return new_id("job")


def chunks(rows: Sequence[ImportRow], budget: int) -> list[ImportChunk]:
    """Rows in chunks of at most CHUNK_ROWS rows and `budget` bytes."""
    found: list[ImportChunk] = []
    current: list[ImportRow] = []
    size = 0
    for row in rows:
        row_size = len(row.model_dump_json()) + 1
        if current and (len(current) >= CHUNK_ROWS or size + row_size > budget):
            found.append(ImportChunk(seq=len(found), rows=current))
            current, size = [], 0
        current.append(row)
        size += row_size
    if current:
        found.append(ImportChunk(seq=len(found), rows=current))
    return found


def commands_of(all_chunks: Sequence[ImportChunk], budget: int) -> Iterator[list[ImportChunk]]:
    """Chunks grouped into commands of at most `budget` bytes (a chunk alone is within it)."""
    group: list[ImportChunk] = []
    size = 0
    for chunk in all_chunks:
        chunk_size = sum(len(row.model_dump_json()) + 1 for row in chunk.rows)
        chunk_size += CHUNK_OVERHEAD_BYTES
        if group and size + chunk_size > budget:
            yield group
            group, size = [], 0
        group.append(chunk)
        size += chunk_size
    if group:
        yield group


def command_budget(ctx: ApiContext) -> int:
    limit = max_payload(ctx.broker)
    if limit is None:
        return COMMAND_BYTES
    return max(16 * 1024, min(COMMAND_BYTES, (limit - COMMAND_HEADROOM_BYTES) // 2))


class ImportRequest:
    """An import request's rows, checked against its template, and the units of quota they
    reserve (row_units.py). Both happen on the request's first run (its `admission`), not on
    a replay of a stored answer: a replay answers the job although the template may have been
    archived or changed since."""

    def __init__(
        self,
        ctx: ApiContext,
        principal: Principal,
        template_id: str,
        bodies_of: Callable[[TemplateRecord], Sequence[dict[str, Any] | RowError]],
    ) -> None:
        self._ctx = ctx
        self._principal = principal
        self.template_id = template_id
        self._bodies_of = bodies_of
        self._rows: list[ImportRow] | None = None
        self.units = RowUnits(ctx, principal, self._wanted, none_refuses=True)

    async def rows(self, *, resuming: bool = False) -> list[ImportRow]:
        """Every row checked (once): the template answers as for POST /v1/passes if it cannot
        issue (`issuable_template`), unless `resuming` an upload the first run began: a
        template archived since then fails the rows in the job, as it does a started job's."""
        if self._rows is None:
            principal = self._principal
            found = await self._ctx.issuer.template(
                principal.account_id, principal.mode, self.template_id
            )
            if resuming and found is not None:
                template = found
            else:
                template = issuable_template(found, self.template_id)
            design = Design.from_stored(template.design)
            self._rows = import_rows(self._bodies_of(template), design)
        return list(self._rows)

    async def _wanted(self) -> int:
        return sum(1 for row in await self.rows() if row.error is None)


async def upload_import(
    ctx: ApiContext, principal: Principal, command_id: str, request: ImportRequest
) -> JobRecord:
    """Send the job's rows and start it; the job as started (or as it is, on a retry)."""
    job_id = job_id_for(command_id)
    existing = await ctx.issuer.jobs.job(principal.account_id, principal.mode, job_id)
    if existing is not None and existing.status != "uploading":
        return existing  # a retry of a request whose upload finished
    rows = await request.rows(resuming=existing is not None)
    # On a retry whose upload had begun, as the first attempt decided, so the same rows pass.
    granted = existing.reserved if existing is not None else await request.units.granted()
    wanted = sum(1 for row in rows if row.error is None)
    if granted < wanted:
        past = row_error(quota_exhausted(ctx.settings.plans, ctx.clock, principal))
        valid = 0
        for index, row in enumerate(rows):
            if row.error is None:
                valid += 1
                if valid > granted:
                    rows[index] = ImportRow(row=row.row, error=past)
    budget = command_budget(ctx)
    template_id = request.template_id
    for number, group in enumerate(commands_of(chunks(rows, budget), budget)):
        base = command_base(principal, f"{command_id}.rows.{number}")
        await ctx.command(
            AddImportRows(
                **base,
                job_id=job_id,
                template_id=template_id,
                reserved=granted,
                reserved_at=request.units.reserved_at,
                chunks=group,
            )
        )
    start = command_base(principal, f"{command_id}.start")
    return await ctx.command(StartJob(**start, job_id=job_id, total=len(rows)))
