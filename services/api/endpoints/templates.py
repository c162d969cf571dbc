"""/v1/templates: create, list, retrieve, update, archive."""

from typing import Annotated, Any

from fastapi import APIRouter, Body, Query, Request
from fastapi.responses import JSONResponse

from services.api.deps import ContextDep, IdempotencyKey, PrincipalDep
from services.api.endpoints.common import QueryBool, paging, require_id, send_command
from services.api.objects import DeletedObject, ListObject, TemplateObject, responses
from services.api.schemas import TemplateCreate, TemplateUpdate
from shared.errors import not_found
from shared.messages import CreateTemplate, UpdateTemplate
from shared.pagination import PageRequest
from shared.redemption import RedemptionInput

router = APIRouter(prefix="/v1/templates", tags=["templates"])


def redemption_sent(policy: RedemptionInput | None) -> dict[str, Any]:
    """The policy's keys as sent ({}: the type's defaults, also for null)."""
    return {} if policy is None else policy.model_dump(mode="json", exclude_unset=True)


@router.post(
    "", summary="Create a template", responses=responses(TemplateObject, 400, 401, 403, 409, 500)
)
async def create_template(
    ctx: ContextDep,
    principal: PrincipalDep,
    request: Request,
    body: TemplateCreate,
    idempotency_key: IdempotencyKey = None,
) -> JSONResponse:
    data = body.model_dump(mode="json")
    # What the request asks for: the policy as sent, which the issuer fills in by the type
    # (`{}` and `{"max_redemptions": null}` differ: single use, unlimited), not as dumped.
    fingerprint = {**data, "redemption": redemption_sent(body.redemption)}
    return await send_command(
        ctx,
        principal,
        request,
        idempotency_key,
        fingerprint,
        lambda base: CreateTemplate(
            **base,
            name=body.name,
            template_type=body.type,
            apple_style=body.apple_style,
            design=data["design"],
            require_download_link=body.require_download_link,
            # The keys sent, not the defaults: the issuer fills those in by the type.
            redemption=redemption_sent(body.redemption),
        ),
        TemplateObject.of,
    )


@router.get(
    "",
    summary="List templates (archived ones only with archived=true)",
    responses=responses(ListObject[TemplateObject], 400, 401, 403),
)
async def list_templates(
    ctx: ContextDep,
    principal: PrincipalDep,
    page: Annotated[PageRequest, paging("template", 50, 100)],
    archived: Annotated[
        QueryBool, Query(description="true: archived templates only; false (default): the others.")
    ] = False,
) -> JSONResponse:
    result = await ctx.issuer.templates_page(
        principal.account_id, principal.mode, page, archived=archived
    )
    data = [TemplateObject.of(record) for record in result.items]
    return JSONResponse(ListObject(data=data, has_more=result.has_more).model_dump(mode="json"))


@router.get(
    "/{template_id}",
    summary="Retrieve a template (archived ones included)",
    responses=responses(TemplateObject, 401, 403, 404),
)
async def get_template(ctx: ContextDep, principal: PrincipalDep, template_id: str) -> JSONResponse:
    require_id(template_id, "template", "template")
    record = await ctx.issuer.template(principal.account_id, principal.mode, template_id)
    if record is None:
        raise not_found("template", template_id)
    return JSONResponse(TemplateObject.of(record).model_dump(mode="json"))


@router.patch(
    "/{template_id}",
    summary="Update a template",
    responses=responses(TemplateObject, 400, 401, 403, 404, 409, 500),
)
async def update_template(
    ctx: ContextDep,
    principal: PrincipalDep,
    request: Request,
    template_id: str,
    body: Annotated[TemplateUpdate, Body()],
    idempotency_key: IdempotencyKey = None,
) -> JSONResponse:
    require_id(template_id, "template", "template")
    data = body.model_dump(mode="json", exclude_unset=True)
    if "redemption" in data:
        data["redemption"] = redemption_sent(body.redemption)
    return await send_command(
        ctx,
        principal,
        request,
        idempotency_key,
        data,
        lambda base: UpdateTemplate(**base, template_id=template_id, **data),
        TemplateObject.of,
    )


@router.delete("/{template_id}", summary="Archive a template", responses=responses(DeletedObject))
async def delete_template(
    ctx: ContextDep, principal: PrincipalDep, request: Request, template_id: str
) -> JSONResponse:
    require_id(template_id, "template", "template")
    return await send_command(
        ctx,
        principal,
        request,
        None,
        None,
        lambda base: UpdateTemplate(**base, template_id=template_id, archived=True),
        lambda record: DeletedObject(id=record.id),
    )
