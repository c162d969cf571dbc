"""POST /v1/passes/batch: up to 100 passes in one request, each row succeeding or failing on
its own, the whole batch idempotent under one Idempotency-Key.

Each row is checked as POST /v1/passes checks its body; the quota is reserved for the rows that
passed, as many as fit (rows past it answer 402 each); those rows go to the issuer in one
command (`CreatePasses`), which writes their passes in one transaction. Units of rows the issuer
refused are given back. With an Idempotency-Key the units are reserved once (row_units.py): a
retry after a timeout re-sends the same rows and takes no unit twice.
With `bundle: true` (at most 10 rows) the same command also makes a pass bundle of the passes
made, in the same transaction.
"""

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from services.api.bundle_objects import PassBundleObject
from services.api.deps import ContextDep, IdempotencyKey, PrincipalDep
from services.api.endpoints.common import command_base, idempotent_response
from services.api.idempotency import Scope, first_to
from services.api.job_uploads import checked
from services.api.limits import quota_exhausted, release_passes
from services.api.objects import (
    BatchObject,
    BatchRowObject,
    PassObject,
    error_body,
    responses,
)
from services.api.row_units import RowUnits
from services.api.schemas import PassBatchCreate, PassCreate
from shared.errors import InvalidRequest
from shared.messages import BatchRow, BatchRowResult, CreatePasses
from shared.models import MAX_BUNDLE_PASSES, RowError, row_error

router = APIRouter(prefix="/v1/passes", tags=["passes"])


@router.post(
    "/batch",
    summary="Issue up to 100 passes, each row on its own",
    responses=responses(BatchObject, 400, 401, 403, 409, 413, 500),
)
async def create_passes(
    ctx: ContextDep,
    principal: PrincipalDep,
    request: Request,
    body: PassBatchCreate,
    idempotency_key: IdempotencyKey = None,
) -> JSONResponse:
    if body.bundle and len(body.passes) > MAX_BUNDLE_PASSES:
        raise InvalidRequest(
            f"A bundle holds at most {MAX_BUNDLE_PASSES} passes; send at most "
            f"{MAX_BUNDLE_PASSES} rows with bundle: true.",
            param="bundle",
            code="parameter_invalid",
        )
    rows: list[BatchRow | RowError] = []
    # The fingerprint of a row is its body as POST /v1/passes reads it (defaults filled in, as
    # that route's fingerprint is), so a retry that omits a default is not a different request.
    sent: list[Any] = []
    for index, row_body in enumerate(body.passes):
        data = checked(row_body, PassCreate)
        rows.append(data if isinstance(data, RowError) else BatchRow(index=index, **data))
        sent.append(row_body if isinstance(data, RowError) else data)
    site = ctx.settings.site_url
    plans = ctx.settings.plans
    valid = [row for row in rows if isinstance(row, BatchRow)]

    async def wanted() -> int:
        return len(valid)

    units = RowUnits(ctx, principal, wanted)

    async def produce(command_id: str) -> BatchObject:
        granted = await units.granted()
        results: dict[int, BatchRowResult] = {}
        bundle = None
        if granted:
            sent = CreatePasses(
                **command_base(principal, command_id), rows=valid[:granted], bundle=body.bundle
            )
            created = await ctx.command(sent, long=True)
            if created.bundle is not None:
                bundle = PassBundleObject.of(created.bundle, site)
            results = {result.index: result for result in created.rows}
            refused = sum(1 for result in created.rows if result.record is None)
            # A retry that took the key over gets the same rows back: given back once.
            if refused and await first_to(ctx.idempotency, "release"):
                release_passes(
                    ctx.quota_leases, ctx.clock, principal, refused, reserved_at=units.reserved_at
                )
        past_quota = row_error(quota_exhausted(plans, ctx.clock, principal))
        answers = []
        for index, row in enumerate(rows):
            if isinstance(row, RowError):
                answers.append(
                    BatchRowObject(index=index, status=row.status, error=error_body(row))
                )
            elif (result := results.get(index)) is None:
                answers.append(
                    BatchRowObject(index=index, status=402, error=error_body(past_quota))
                )
            elif result.record is not None:
                answers.append(
                    BatchRowObject(
                        index=index, status=201, pass_object=PassObject.of(result.record, site)
                    )
                )
            elif result.error is not None:
                error = result.error
                answers.append(
                    BatchRowObject(index=index, status=error.status, error=error_body(error))
                )
        return BatchObject(data=answers, bundle=bundle)

    # The rows as checked, not dumped again: a refused row may hold what no dump takes (a lone
    # surrogate in a key, a nesting past pydantic's serialisation depth): each was a 500.
    data = {"bundle": body.bundle, "passes": sent}
    scope = Scope.of(principal)
    return await idempotent_response(
        ctx, scope, request, idempotency_key, data, produce, admit=units.admission()
    )
