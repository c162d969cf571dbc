"""/v1/webhooks: subscriptions and their delivery history (spec 2.6, 2.7, 3.4, 4.1).

Writes go to the webhooks service over NATS; reads use its read-only repository. The signing
secret appears only in the create response; an Idempotency-Key replay answers it "[redacted]".
"""

from typing import Annotated, Any

from fastapi import APIRouter, Body, Request
from fastapi.responses import JSONResponse

from services.api.accounts import Principal
from services.api.deps import ApiContext, ContextDep, IdempotencyKey, PrincipalDep
from services.api.endpoints.common import paging, require_id, send_command
from services.api.objects import (
    DeletedObject,
    DeliveryObject,
    ListObject,
    WebhookObject,
    WebhookWithSecret,
    responses,
)
from services.api.schemas import WebhookCreate, WebhookUpdate
from shared.errors import not_found
from shared.messages import CreateWebhook, DeleteWebhook, UpdateWebhook
from shared.pagination import PageRequest
from shared.views import WebhookView

router = APIRouter(prefix="/v1/webhooks", tags=["webhooks"])
REDACTED = "[redacted]"


def _redact(shaped: Any) -> Any:
    """The copy of a create's answer kept for replays: the secret is shown once."""
    return {**shaped, "secret": REDACTED} if "secret" in shaped else shaped


@router.post(
    "", summary="Create a webhook", responses=responses(WebhookWithSecret, 400, 401, 403, 409)
)
async def create_webhook(
    ctx: ContextDep,
    principal: PrincipalDep,
    request: Request,
    body: WebhookCreate,
    idempotency_key: IdempotencyKey = None,
) -> JSONResponse:
    data = body.model_dump(mode="json")
    return await send_command(
        ctx,
        principal,
        request,
        idempotency_key,
        data,
        lambda base: CreateWebhook(**base, **data),
        WebhookWithSecret.created,
        redact=_redact,
    )


@router.get("", summary="List webhooks", responses=responses(ListObject[WebhookObject], 400, 401))
async def list_webhooks(
    ctx: ContextDep,
    principal: PrincipalDep,
    page: Annotated[PageRequest, paging("webhook", 100, 100)],
) -> JSONResponse:
    result = await ctx.webhooks.page(principal.account_id, principal.mode, page)
    data = [WebhookObject.of(view) for view in result.items]
    return JSONResponse(ListObject(data=data, has_more=result.has_more).model_dump(mode="json"))


async def _webhook(ctx: ApiContext, principal: Principal, webhook_id: str) -> WebhookView:
    require_id(webhook_id, "webhook", "webhook")
    record = await ctx.webhooks.get(principal.account_id, principal.mode, webhook_id)
    if record is None:
        raise not_found("webhook", webhook_id)
    return record


@router.get(
    "/{webhook_id}", summary="Retrieve a webhook", responses=responses(WebhookObject, 401, 404)
)
async def get_webhook(ctx: ContextDep, principal: PrincipalDep, webhook_id: str) -> JSONResponse:
    view = await _webhook(ctx, principal, webhook_id)
    return JSONResponse(WebhookObject.of(view).model_dump(mode="json"))


@router.patch(
    "/{webhook_id}",
    summary="Update a webhook",
    responses=responses(WebhookObject, 400, 401, 403, 404, 409, 500),
)
async def update_webhook(
    ctx: ContextDep,
    principal: PrincipalDep,
    request: Request,
    webhook_id: str,
    body: Annotated[WebhookUpdate, Body()],
    idempotency_key: IdempotencyKey = None,
) -> JSONResponse:
    require_id(webhook_id, "webhook", "webhook")
    data = body.model_dump(mode="json", exclude_unset=True)
    return await send_command(
        ctx,
        principal,
        request,
        idempotency_key,
        data,
        lambda base: UpdateWebhook(**base, webhook_id=webhook_id, **data),
        WebhookObject.of,
    )


@router.delete(
    "/{webhook_id}",
    summary="Delete a webhook and its delivery history",
    responses=responses(DeletedObject, 401, 404),
)
async def delete_webhook(
    ctx: ContextDep, principal: PrincipalDep, request: Request, webhook_id: str
) -> JSONResponse:
    require_id(webhook_id, "webhook", "webhook")
    return await send_command(
        ctx,
        principal,
        request,
        None,
        None,
        lambda base: DeleteWebhook(**base, webhook_id=webhook_id),
        lambda deleted: DeletedObject(id=deleted.id),
    )


@router.get(
    "/{webhook_id}/deliveries",
    summary="The last 100 deliveries of a webhook, newest first",
    responses=responses(ListObject[DeliveryObject], 401, 404),
)
async def list_deliveries(
    ctx: ContextDep, principal: PrincipalDep, webhook_id: str
) -> JSONResponse:
    record = await _webhook(ctx, principal, webhook_id)
    deliveries = await ctx.webhooks.recent_deliveries(record.id)
    data = [DeliveryObject.of(delivery) for delivery in deliveries]
    return JSONResponse(ListObject(data=data, has_more=False).model_dump(mode="json"))
