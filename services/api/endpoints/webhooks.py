"""/v1/webhooks: subscriptions and their delivery history (spec 2.6, 2.7, 3.4, 4.1).

Writes go to the webhooks service over NATS; reads use its read-only repository. The signing
secret appears only in the create response; an Idempotency-Key replay answers it "[redacted]".
"""

from typing import Annotated, Any

from fastapi import APIRouter, Body, Request
from fastapi.responses import JSONResponse

from services.api.accounts import Principal
from services.api.deps import ApiContext, ContextDep, IdempotencyKey, PrincipalDep
from services.api.endpoints.common import paging, require_id
from services.api.idempotency import Scope, execute, fingerprint
from services.api.objects import (
    DeletedObject,
    DeliveryObject,
    ListObject,
    WebhookObject,
    WebhookWithSecret,
    responses,
)
from services.api.schemas import (
    WebhookCreate,
    WebhookUpdate,
    delivery_object,
    list_object,
    webhook_object,
)
from shared.errors import not_found
from shared.logs import request_id_var
from shared.messages import (
    Command,
    CreateWebhook,
    DeleteWebhook,
    UpdateWebhook,
    webhooks_subject,
)
from shared.models import WebhookRecord
from shared.pagination import PageRequest

router = APIRouter(prefix="/v1/webhooks", tags=["webhooks"])
REDACTED = "[redacted]"


async def _send(
    ctx: ApiContext,
    principal: Principal,
    request: Request,
    key: str | None,
    body: Any,
    command_type: type[Command],
    fields: dict[str, Any],
) -> JSONResponse:
    async def action(command_id: str) -> tuple[int, Any]:
        command = command_type(
            command_id=command_id,
            account_id=principal.account_id,
            mode=principal.mode,
            request_id=request_id_var.get(),
            **fields,
        )
        subject = webhooks_subject(command_type.model_fields["type"].default)
        result = await ctx.command(subject, command)
        if result.get("deleted"):
            return 200, {"id": result["id"], "deleted": True}
        shaped = webhook_object(WebhookRecord.model_validate({**result, "secret_encrypted": ""}))
        if "secret" in result:
            shaped["secret"] = result["secret"]
        return 200, shaped

    def redact(shaped: Any) -> Any:
        return {**shaped, "secret": REDACTED} if "secret" in shaped else shaped

    return await execute(
        ctx.idempotency,
        Scope.of(principal),
        key,
        fingerprint(request.method, request.url.path, body),
        action,
        redact=redact,
    )


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
    return await _send(ctx, principal, request, idempotency_key, data, CreateWebhook, data)


@router.get("", summary="List webhooks", responses=responses(ListObject[WebhookObject], 400, 401))
async def list_webhooks(
    ctx: ContextDep,
    principal: PrincipalDep,
    page: Annotated[PageRequest, paging("webhook", 100, 100)],
) -> JSONResponse:
    result = await ctx.webhooks.page(principal.account_id, principal.mode, page)
    data = [webhook_object(WebhookRecord.model_validate(doc)) for doc in result.documents]
    return JSONResponse(list_object(data, result.has_more))


async def _webhook(ctx: ApiContext, principal: Principal, webhook_id: str) -> WebhookRecord:
    require_id(webhook_id, "webhook", "webhook")
    record = await ctx.webhooks.get(principal.account_id, principal.mode, webhook_id)
    if record is None:
        raise not_found("webhook", webhook_id)
    return record


@router.get(
    "/{webhook_id}", summary="Retrieve a webhook", responses=responses(WebhookObject, 401, 404)
)
async def get_webhook(ctx: ContextDep, principal: PrincipalDep, webhook_id: str) -> JSONResponse:
    return JSONResponse(webhook_object(await _webhook(ctx, principal, webhook_id)))


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
    fields = {"webhook_id": webhook_id, **data}
    return await _send(ctx, principal, request, idempotency_key, data, UpdateWebhook, fields)


@router.delete(
    "/{webhook_id}",
    summary="Delete a webhook and its delivery history",
    responses=responses(DeletedObject, 401, 404),
)
async def delete_webhook(
    ctx: ContextDep, principal: PrincipalDep, request: Request, webhook_id: str
) -> JSONResponse:
    require_id(webhook_id, "webhook", "webhook")
    fields = {"webhook_id": webhook_id}
    return await _send(ctx, principal, request, None, None, DeleteWebhook, fields)


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
    return JSONResponse(list_object([delivery_object(d) for d in deliveries], False))
