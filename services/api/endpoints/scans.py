"""/v1/scans: scan a pass in (a scanner key may call this and nothing else), list scans; and
the scans of one pass (docs/redemption.md)."""

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse

from services.api.deps import ContextDep, IdempotencyKey, PrincipalDep
from services.api.endpoints.common import paging, require_pass, send_command
from services.api.objects import ListObject, responses
from services.api.scan_objects import ScanObject
from services.api.schemas import ScanCreate
from shared.messages import RedeemPass
from shared.pagination import PageRequest

router = APIRouter(tags=["scans"])


@router.post(
    "/v1/scans",
    summary="Scan a pass: accepted or rejected, always answered 200 with the scan",
    responses=responses(ScanObject, 400, 401, 403, 409, 500),
)
async def create_scan(
    ctx: ContextDep,
    principal: PrincipalDep,
    request: Request,
    body: ScanCreate,
    idempotency_key: IdempotencyKey = None,
) -> JSONResponse:
    data = body.model_dump(mode="json", exclude_none=True)
    # No pass quota: a scan makes no pass. The rate limit applies (PrincipalDep).
    return await send_command(
        ctx,
        principal,
        request,
        idempotency_key,
        data,
        lambda base: RedeemPass(**base, **data),
        ScanObject.of,
    )


@router.get(
    "/v1/scans",
    summary="List scans, newest first",
    responses=responses(ListObject[ScanObject], 400, 401, 403),
)
async def list_scans(
    ctx: ContextDep,
    principal: PrincipalDep,
    page: Annotated[PageRequest, paging("scan", 50, 100)],
    pass_id: Annotated[str | None, Query(max_length=100)] = None,
    result: Annotated[Literal["accepted", "rejected"] | None, Query()] = None,
) -> JSONResponse:
    found = await ctx.issuer.scans_page(
        principal.account_id, principal.mode, page, pass_id=pass_id, result=result
    )
    data = [ScanObject.of(record) for record in found.items]
    return JSONResponse(ListObject(data=data, has_more=found.has_more).model_dump(mode="json"))


@router.get(
    "/v1/passes/{pass_id}/scans",
    summary="List the scans of a pass, newest first",
    responses=responses(ListObject[ScanObject], 400, 401, 403, 404),
)
async def list_pass_scans(
    ctx: ContextDep,
    principal: PrincipalDep,
    pass_id: str,
    page: Annotated[PageRequest, paging("scan", 50, 100)],
) -> JSONResponse:
    await require_pass(ctx, principal, pass_id)
    found = await ctx.issuer.scans_page(principal.account_id, principal.mode, page, pass_id=pass_id)
    data = [ScanObject.of(record) for record in found.items]
    return JSONResponse(ListObject(data=data, has_more=found.has_more).model_dump(mode="json"))
