"""/v1/jobs: long work as a resource. Create an import (JSON rows, or CSV on
/v1/jobs/import_passes), list, retrieve, cancel, and stream a job's results (CSV or NDJSON)."""

import csv
import hashlib
import io
import json
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, StreamingResponse

from services.api.accounts import Principal
from services.api.deps import ApiContext, ContextDep, IdempotencyKey, PrincipalDep
from services.api.endpoints.common import (
    command_base,
    idempotent_response,
    paging,
    require_id,
)
from services.api.idempotency import Scope, first_to
from services.api.job_csv import IMPORT_MAX_BODY_BYTES, parse_rows
from services.api.job_schemas import JobCreate
from services.api.job_uploads import ImportRequest, checked_rows, upload_import
from services.api.limits import release_passes
from services.api.middleware import BodyRule
from services.api.objects import JobObject, ListObject, pass_urls, responses
from services.api.schemas import MAX_IMPORT_ROWS
from shared.design import Design
from shared.errors import not_found
from shared.messages import CancelJob, CreateUpdatePassesJob
from shared.models import JobRowOutcome, RowError, TemplateRecord
from shared.pagination import PageRequest

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])

CSV_PATH = "/v1/jobs/import_passes"
BODY_RULES = {
    "/v1/jobs": BodyRule(IMPORT_MAX_BODY_BYTES),
    CSV_PATH: BodyRule(IMPORT_MAX_BODY_BYTES, frozenset({b"text/csv"})),
}
RESULT_COLUMNS = (
    "row",
    "status",
    "pass_id",
    "url",
    "download_url",
    "error_type",
    "error_code",
    "error_message",
    "error_param",
)


def _accepted(statuses: tuple[int, ...]) -> dict[int | str, dict[str, Any]]:
    documented = responses(JobObject, *statuses)
    documented[202] = documented.pop(200)
    return documented


async def _create_import(
    ctx: ApiContext,
    principal: Principal,
    request: Request,
    key: str | None,
    fingerprinted: Any,
    upload: ImportRequest,
) -> JSONResponse:
    async def produce(command_id: str) -> JobObject:
        return JobObject.of(await upload_import(ctx, principal, command_id, upload))

    scope = Scope.of(principal)
    return await idempotent_response(
        ctx, scope, request, key, fingerprinted, produce, status=202, admit=upload.units.admission()
    )


@router.post(
    "",
    status_code=202,
    summary="Create a job: import passes from rows, or update every pass of a template",
    responses=_accepted((400, 401, 402, 403, 404, 409, 413, 500)),
)
async def create_job(
    ctx: ContextDep,
    principal: PrincipalDep,
    request: Request,
    body: JobCreate,
    idempotency_key: IdempotencyKey = None,
) -> JSONResponse:
    # Not the rows: a refused row may hold what no dump takes (a lone surrogate in a key, a
    # nesting past pydantic's serialisation depth); they are fingerprinted as checked, below.
    data = body.model_dump(mode="json", exclude_unset=True, exclude={"rows"})
    if body.type == "update_passes":

        async def produce(command_id: str) -> JobObject:
            command = CreateUpdatePassesJob(
                **command_base(principal, command_id),
                template_id=body.template_id,
                field_values=body.field_values,
                metadata=body.metadata,
            )
            return JobObject.of(await ctx.command(command))

        scope = Scope.of(principal)
        return await idempotent_response(
            ctx, scope, request, idempotency_key, data, produce, status=202
        )
    sent = body.rows or []
    rows = checked_rows(sent)
    # Fingerprinted by each row as POST /v1/passes reads a body (a refused row as sent), so a
    # retry that omits a default is not a different request.
    data["rows"] = [
        raw if isinstance(row, RowError) else row for raw, row in zip(sent, rows, strict=True)
    ]
    upload = ImportRequest(ctx, principal, body.template_id, lambda _template: rows)
    return await _create_import(ctx, principal, request, idempotency_key, data, upload)


@router.post(
    "/import_passes",
    status_code=202,
    summary="Create an import job from CSV (Content-Type: text/csv)",
    responses=_accepted((400, 401, 402, 403, 404, 409, 413, 415, 500)),
)
async def import_csv(
    ctx: ContextDep,
    principal: PrincipalDep,
    request: Request,
    template_id: Annotated[str, Query(max_length=100)],
    idempotency_key: IdempotencyKey = None,
) -> JSONResponse:
    data = await request.body()

    def bodies_of(template: TemplateRecord) -> list[Any]:
        field_keys = set(Design.from_stored(template.design).field_keys())
        return checked_rows(parse_rows(data, field_keys, MAX_IMPORT_ROWS))

    upload = ImportRequest(ctx, principal, template_id, bodies_of)
    # The fingerprint of a CSV request: its template and the digest of its bytes.
    fingerprinted = {"template_id": template_id, "csv_sha256": hashlib.sha256(data).hexdigest()}
    return await _create_import(ctx, principal, request, idempotency_key, fingerprinted, upload)


@router.get(
    "",
    summary="List jobs, newest first",
    responses=responses(ListObject[JobObject], 400, 401, 403),
)
async def list_jobs(
    ctx: ContextDep,
    principal: PrincipalDep,
    page: Annotated[PageRequest, paging("job", 50, 100)],
    type: Annotated[  # the API's filter is named `type`
        Literal["import_passes", "update_passes", "template_rollout"] | None, Query()
    ] = None,
    template_id: Annotated[str | None, Query(max_length=100)] = None,
    status: Annotated[
        Literal["queued", "running", "succeeded", "failed", "canceled"] | None, Query()
    ] = None,
) -> JSONResponse:
    result = await ctx.issuer.jobs.page(
        principal.account_id,
        principal.mode,
        page,
        job_type=type,
        template_id=template_id,
        status=status,
    )
    data = [JobObject.of(record) for record in result.items]
    return JSONResponse(ListObject(data=data, has_more=result.has_more).model_dump(mode="json"))


@router.get("/{job_id}", summary="Retrieve a job", responses=responses(JobObject, 401, 403, 404))
async def get_job(ctx: ContextDep, principal: PrincipalDep, job_id: str) -> JSONResponse:
    require_id(job_id, "job", "job")
    record = await ctx.issuer.jobs.job(principal.account_id, principal.mode, job_id)
    if record is None:
        raise not_found("job", job_id)
    return JSONResponse(JobObject.of(record).model_dump(mode="json"))


@router.post(
    "/{job_id}/cancel",
    summary="Cancel a job: it takes no new work; what is done stays done",
    responses=responses(JobObject, 401, 403, 404, 409, 500),
)
async def cancel_job(
    ctx: ContextDep,
    principal: PrincipalDep,
    request: Request,
    job_id: str,
    idempotency_key: IdempotencyKey = None,
) -> JSONResponse:
    require_id(job_id, "job", "job")

    async def produce(command_id: str) -> JobObject:
        canceled = await ctx.command(
            CancelJob(**command_base(principal, command_id), job_id=job_id)
        )
        # The units of the rows that will never run go back to this month's quota, once: only
        # the command that canceled the job says any, and a retry that took the key over after
        # a timeout, which gets that answer again, gives back only what no run gave back yet.
        # Units the import reserved in an earlier month stay there.
        if canceled.released and await first_to(ctx.idempotency, "release"):
            release_passes(
                ctx.quota_leases,
                ctx.clock,
                principal,
                canceled.released,
                # The api's clock at the reservation; the issuer's at the job's creation for a
                # job made before 2026-11-28 (a moment, or a retry's hours, later).
                reserved_at=canceled.job.reserved_at or canceled.job.created_at,
            )
        return JobObject.of(canceled.job)

    return await idempotent_response(
        ctx, Scope.of(principal), request, idempotency_key, None, produce
    )


def _line(outcome: JobRowOutcome, site_url: str, made: bool) -> dict[str, Any]:
    """A row's result line: with `made` (an import) a success is 201 as POST /v1/passes
    answers, otherwise (an update job, a rollout) 200 as PATCH /v1/passes/{id} answers."""
    if outcome.error is not None:
        error = outcome.error
        body = {"type": error.type, "code": error.code, "message": error.message}
        return {
            "row": outcome.row,
            "pass_id": outcome.pass_id,
            "status": error.status,
            "error": body | {"param": error.param},
        }
    url, download_url = pass_urls(site_url, outcome.short_id or "")
    return {
        "row": outcome.row,
        "status": 201 if made else 200,
        "pass_id": outcome.pass_id,
        "url": url,
        "download_url": download_url,
    }


# A cell a spreadsheet would run as a formula (OWASP "CSV injection"): quoted as text.
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_NDJSON_TYPES = ("application/x-ndjson", "application/jsonl", "application/json")


def _csv_line(values: list[Any]) -> str:
    out = io.StringIO()
    # RFC 4180's CRLF: the writer then quotes a cell holding a lone CR as well as an LF (with
    # "\n" alone it wrote `x\r=cmd...` bare, and a spreadsheet started a row, a formula, there).
    csv.writer(out, lineterminator="\r\n").writerow([_as_text(value) for value in values])
    return out.getvalue()


def _as_text(value: Any) -> Any:
    if isinstance(value, str) and value.startswith(_FORMULA_STARTS):
        return "'" + value
    return value


def _wants_csv(accept: str | None) -> bool:
    """CSV when the client prefers text/csv to every NDJSON type it names (by q-value, then
    by order; `q=0` refuses a type); NDJSON otherwise, the default."""
    ranks: dict[str, tuple[float, int]] = {}
    for position, part in enumerate((accept or "").split(",")):
        media, *params = (piece.strip().lower() for piece in part.split(";"))
        quality = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip() == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
        kind = "csv" if media == "text/csv" else "ndjson" if media in _NDJSON_TYPES else None
        if kind is not None and quality > 0:
            rank = (quality, -position)  # the higher q, then the earlier
            ranks[kind] = max(ranks.get(kind, rank), rank)
    wanted = ranks.get("csv")
    return wanted is not None and wanted > ranks.get("ndjson", (0.0, 0))


@router.get(
    "/{job_id}/results",
    summary="Each row's pass and links, or its error: NDJSON, or CSV with Accept: text/csv",
    responses={
        200: {
            "description": "One line per processed row, in row order.",
            "content": {"application/x-ndjson": {}, "text/csv": {}},
        },
        **{
            status: spec
            for status, spec in responses(JobObject, 401, 403, 404).items()
            if status != 200
        },
    },
)
async def job_results(
    ctx: ContextDep, principal: PrincipalDep, request: Request, job_id: str
) -> StreamingResponse:
    require_id(job_id, "job", "job")
    job = await ctx.issuer.jobs.job(principal.account_id, principal.mode, job_id)
    if job is None:
        raise not_found("job", job_id)
    site = ctx.settings.site_url
    as_csv = _wants_csv(request.headers.get("accept"))
    made = job.type == "import_passes"

    async def lines() -> AsyncIterator[str]:
        # One chunk of rows at a time: a 100,000-row job is never held in memory.
        if as_csv:
            yield _csv_line(list(RESULT_COLUMNS))
        async for outcomes in ctx.issuer.jobs.results(job):
            text = []
            for outcome in outcomes:
                line = _line(outcome, site, made)
                if as_csv:
                    error = line.get("error") or {}
                    text.append(
                        _csv_line(
                            [
                                line["row"] if line["row"] is not None else "",
                                line["status"],
                                line.get("pass_id") or "",
                                line.get("url", ""),
                                line.get("download_url", ""),
                                error.get("type", ""),
                                error.get("code") or "",
                                error.get("message", ""),
                                error.get("param") or "",
                            ]
                        )
                    )
                else:
                    present = {k: v for k, v in line.items() if v is not None}
                    text.append(json.dumps(present, separators=(",", ":")) + "\n")
            yield "".join(text)

    media = "text/csv; charset=utf-8" if as_csv else "application/x-ndjson"
    name = f"{job_id}-results.{'csv' if as_csv else 'ndjson'}"
    headers = {"Content-Disposition": f'inline; filename="{name}"'}
    return StreamingResponse(lines(), media_type=media, headers=headers)
