"""/v1/webhooks: subscriptions and their delivery history (spec 2.6, 2.7, 3.4, 4.1).

Writes go to the webhooks service over NATS; reads use its read-only repository. The signing
secret appears only in the create and rotate_secret responses; an Idempotency-Key replay
answers it "[redacted]".
"""

from typing import Annotated, Any, get_args

from fastapi import APIRouter, Body, Depends, Request
from fastapi.responses import JSONResponse

from services.api.accounts import Principal
from services.api.delivery_schemas import DeliveryFilters, RecoverBody, delivery_filters
from services.api.deps import ApiContext, ContextDep, IdempotencyKey, PrincipalDep
from services.api.endpoints.common import paging, require_id, send_command
from services.api.idempotency import REDACTED
from services.api.objects import DeletedObject, ListObject, responses
from services.api.schemas import WebhookCreate, WebhookSecretRotate, WebhookUpdate
from services.api.webhook_objects import (
    DeliveryObject,
    RecoveryObject,
    WebhookObject,
    WebhookWithSecret,
)
from services.webhooks.reads import DELIVERIES_LISTED
from shared.errors import not_found
from shared.ids import has_prefix
from shared.messages import (
    CreateWebhook,
    DeleteWebhook,
    NullableWebhookField,
    RecoverDeliveries,
    ResendDelivery,
    RotateWebhookSecret,
    UpdateWebhook,
)
from shared.pagination import PageRequest
from shared.views import WebhookView

router = APIRouter(prefix="/v1/webhooks", tags=["webhooks"])


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
    # Sent as null: cleared (the command cannot tell null from absent by itself).
    nulls = [key for key in get_args(NullableWebhookField) if key in data and data[key] is None]
    return await send_command(
        ctx,
        principal,
        request,
        idempotency_key,
        data,
        lambda base: UpdateWebhook(**base, webhook_id=webhook_id, nulls=nulls, **data),
        WebhookObject.of,
    )


@router.post(
    "/{webhook_id}/rotate_secret",
    summary="Rotate a webhook's signing secret, the old one signing for a grace period",
    responses=responses(WebhookWithSecret, 400, 401, 403, 404, 409, 500),
)
async def rotate_secret(
    ctx: ContextDep,
    principal: PrincipalDep,
    request: Request,
    webhook_id: str,
    body: Annotated[WebhookSecretRotate | None, Body()] = None,
    idempotency_key: IdempotencyKey = None,
) -> JSONResponse:
    require_id(webhook_id, "webhook", "webhook")
    data = (body or WebhookSecretRotate()).model_dump(mode="json")
    return await send_command(
        ctx,
        principal,
        request,
        idempotency_key,
        data,
        lambda base: RotateWebhookSecret(**base, webhook_id=webhook_id, **data),
        WebhookWithSecret.created,
        redact=_redact,
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
    summary="A webhook's deliveries, newest first (the last 100 by default)",
    responses=responses(ListObject[DeliveryObject], 400, 401, 404),
)
async def list_deliveries(
    ctx: ContextDep,
    principal: PrincipalDep,
    webhook_id: str,
    page: Annotated[PageRequest, paging("webhook_delivery", DELIVERIES_LISTED, DELIVERIES_LISTED)],
    filters: Annotated[DeliveryFilters, Depends(delivery_filters)],
) -> JSONResponse:
    record = await _webhook(ctx, principal, webhook_id)
    result = await ctx.webhooks.deliveries_page(
        record.id, page, status=filters.status, event_type=filters.event_type
    )
    data = [DeliveryObject.of(delivery) for delivery in result.items]
    return JSONResponse(ListObject(data=data, has_more=result.has_more).model_dump(mode="json"))


@router.post(
    "/{webhook_id}/deliveries/{delivery_id}/resend",
    summary="Attempt a delivery once more, now, whatever its status",
    responses=responses(DeliveryObject, 400, 401, 403, 404, 409),
)
async def resend_delivery(
    ctx: ContextDep,
    principal: PrincipalDep,
    request: Request,
    webhook_id: str,
    delivery_id: str,
    idempotency_key: IdempotencyKey = None,
) -> JSONResponse:
    require_id(webhook_id, "webhook", "webhook")
    if not has_prefix(delivery_id, "webhook_delivery"):
        # The webhook is looked for first, as the webhooks service does for a well-formed id.
        if await ctx.webhooks.get(principal.account_id, principal.mode, webhook_id) is None:
            raise not_found("webhook", webhook_id)
        raise not_found("webhook delivery", delivery_id, "delivery_id")
    return await send_command(
        ctx,
        principal,
        request,
        idempotency_key,
        None,
        lambda base: ResendDelivery(**base, webhook_id=webhook_id, delivery_id=delivery_id),
        DeliveryObject.of,
    )


@router.post(
    "/{webhook_id}/recover",
    summary="Re-queue the failed and dead deliveries created in a time range",
    responses=responses(RecoveryObject, 400, 401, 403, 404, 409),
)
async def recover_deliveries(
    ctx: ContextDep,
    principal: PrincipalDep,
    request: Request,
    webhook_id: str,
    body: RecoverBody,
    idempotency_key: IdempotencyKey = None,
) -> JSONResponse:
    require_id(webhook_id, "webhook", "webhook")
    return await send_command(
        ctx,
        principal,
        request,
        idempotency_key,
        body.model_dump(mode="json"),
        lambda base: RecoverDeliveries(**base, webhook_id=webhook_id, **body.model_dump()),
        RecoveryObject.of,
    )
