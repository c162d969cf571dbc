"""/v1/passes: issue, list, retrieve, update, void, redact; and the events of one pass."""

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse
from pydantic import EmailStr

from services.api.deps import ContextDep, IdempotencyKey, PrincipalDep
from services.api.endpoints.common import (
    EventTypeQuery,
    QueryBool,
    paging,
    require_id,
    require_pass,
    send_command,
)
from services.api.idempotency import Admission
from services.api.objects import ListObject, PassEventObject, PassObject, responses
from services.api.schemas import HOLDER_FIELDS, PassCreate, PassUpdate
from shared.errors import not_found
from shared.messages import CreatePass, RedactPass, UpdatePass, VoidPass
from shared.pagination import PageRequest

router = APIRouter(prefix="/v1/passes", tags=["passes"])


@router.post(
    "",
    summary="Issue a pass from a template",
    responses=responses(PassObject, 400, 401, 402, 403, 404, 409, 500),
)
async def create_pass(
    ctx: ContextDep,
    principal: PrincipalDep,
    request: Request,
    body: PassCreate,
    idempotency_key: IdempotencyKey = None,
) -> JSONResponse:
    data = body.model_dump(mode="json")
    site = ctx.settings.site_url
    return await send_command(
        ctx,
        principal,
        request,
        idempotency_key,
        data,
        lambda base: CreatePass(**base, **data),
        lambda record: PassObject.of(record, site),
        admit=Admission(lambda: ctx.reserve_pass(principal)),
    )


@router.get(
    "",
    summary="List passes, newest first",
    responses=responses(ListObject[PassObject], 400, 401, 403),
)
async def list_passes(
    ctx: ContextDep,
    principal: PrincipalDep,
    page: Annotated[PageRequest, paging("pass", 50, 100)],
    template_id: Annotated[str | None, Query()] = None,
    holder_email: Annotated[EmailStr | None, Query()] = None,
    voided: Annotated[
        QueryBool | None, Query(description="true: voided passes only; false: the others.")
    ] = None,
) -> JSONResponse:
    result = await ctx.issuer.passes_page(
        principal.account_id,
        principal.mode,
        page,
        template_id=template_id,
        holder_email=holder_email,
        voided=voided,
    )
    site = ctx.settings.site_url
    data = [PassObject.of(record, site) for record in result.items]
    return JSONResponse(ListObject(data=data, has_more=result.has_more).model_dump(mode="json"))


@router.get("/{pass_id}", summary="Retrieve a pass", responses=responses(PassObject, 401, 403, 404))
async def get_pass(ctx: ContextDep, principal: PrincipalDep, pass_id: str) -> JSONResponse:
    require_id(pass_id, "pass", "pass")
    record = await ctx.issuer.pass_(principal.account_id, principal.mode, pass_id)
    if record is None:
        raise not_found("pass", pass_id)
    return JSONResponse(PassObject.of(record, ctx.settings.site_url).model_dump(mode="json"))


@router.patch(
    "/{pass_id}",
    summary="Update field values or metadata; pushes to installed passes",
    responses=responses(PassObject, 400, 401, 403, 404, 409, 500),
)
async def update_pass(
    ctx: ContextDep,
    principal: PrincipalDep,
    request: Request,
    pass_id: str,
    body: PassUpdate,
    idempotency_key: IdempotencyKey = None,
) -> JSONResponse:
    require_id(pass_id, "pass", "pass")
    data = body.model_dump(mode="json", exclude_unset=True)
    changes = dict(data)
    holder = {name: changes.pop(name) for name in HOLDER_FIELDS if name in changes}
    site = ctx.settings.site_url
    return await send_command(
        ctx,
        principal,
        request,
        idempotency_key,
        data,
        lambda base: UpdatePass(**base, pass_id=pass_id, holder=holder or None, **changes),
        lambda record: PassObject.of(record, site),
    )


@router.post(
    "/{pass_id}/redact",
    summary="Redact a pass: erase its holder's data and void it",
    responses=responses(PassObject, 400, 401, 403, 404, 409, 500),
)
async def redact_pass(
    ctx: ContextDep,
    principal: PrincipalDep,
    request: Request,
    pass_id: str,
    idempotency_key: IdempotencyKey = None,
) -> JSONResponse:
    """Erases the holder's name and email, the field values and the metadata of the pass, and
    every copy Tessera keeps of them (docs/privacy.md); voids the pass, rebuilds its file
    without them, and records a `voided` event with `metadata.reason: "redacted"`."""
    require_id(pass_id, "pass", "pass")
    site = ctx.settings.site_url
    account_id, mode = principal.account_id, principal.mode
    # What its barcode shows before the redaction (which may change it): erased from the
    # stored answers of the scans that read it.
    before = await ctx.issuer.pass_(account_id, mode, pass_id)
    answer = await send_command(
        ctx,
        principal,
        request,
        idempotency_key,
        None,
        lambda base: RedactPass(**base, pass_id=pass_id),
        lambda record: PassObject.of(record, site),
    )
    deliveries = await ctx.webhooks.delivery_ids_of_pass(account_id, mode, pass_id)
    code = before.barcode_message if before else None
    await ctx.repo.erase_pass_copies(account_id, mode, pass_id, deliveries, code)
    return answer


@router.delete(
    "/{pass_id}",
    summary="Void a pass (passes are never deleted)",
    responses=responses(PassObject, 401, 403, 404, 500),
)
async def void_pass(
    ctx: ContextDep, principal: PrincipalDep, request: Request, pass_id: str
) -> JSONResponse:
    require_id(pass_id, "pass", "pass")
    site = ctx.settings.site_url
    return await send_command(
        ctx,
        principal,
        request,
        None,
        None,
        lambda base: VoidPass(**base, pass_id=pass_id),
        lambda record: PassObject.of(record, site),
    )


@router.get(
    "/{pass_id}/events",
    summary="List the events of a pass, newest first",
    responses=responses(ListObject[PassEventObject], 400, 401, 403, 404),
)
async def list_pass_events(
    ctx: ContextDep,
    principal: PrincipalDep,
    pass_id: str,
    page: Annotated[PageRequest, paging("pass_event", 100, 200)],
    event_type: EventTypeQuery = None,
) -> JSONResponse:
    await require_pass(ctx, principal, pass_id)
    result = await ctx.events.page(
        principal.account_id, principal.mode, page, pass_id=pass_id, event_type=event_type
    )
    data = [PassEventObject.of(record) for record in result.items]
    return JSONResponse(ListObject(data=data, has_more=result.has_more).model_dump(mode="json"))
