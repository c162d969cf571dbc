"""/v1/scanner_keys: keys that may only scan, made and revoked with the account's secret key
(services/api/scanner_keys.py)."""

from typing import Annotated

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from services.api.deps import ContextDep, IdempotencyKey, PrincipalDep
from services.api.endpoints.common import idempotent_response, paging
from services.api.idempotency import Scope, without_keys
from services.api.objects import ListObject, responses
from services.api.scan_objects import ScannerKeyCreated, ScannerKeyObject
from services.api.scanner_keys import (
    create_scanner_key,
    key_object,
    require_secret_key,
    revoke_scanner_key,
)
from services.api.schemas import ScannerKeyCreate
from shared.pagination import PageRequest

router = APIRouter(prefix="/v1/scanner_keys", tags=["scanner keys"])


@router.post(
    "",
    summary="Create a scanner key (the key is shown in this answer only)",
    responses=responses(ScannerKeyCreated, 400, 401, 403, 409),
)
async def create_key(
    ctx: ContextDep,
    principal: PrincipalDep,
    request: Request,
    body: ScannerKeyCreate,
    idempotency_key: IdempotencyKey = None,
) -> JSONResponse:
    require_secret_key(principal)

    async def produce(command_id: str) -> ScannerKeyCreated:
        return await create_scanner_key(ctx.repo, ctx.clock, principal, body.name, command_id)

    # Like every POST, idempotent by key; a replay shows the key as "[redacted]" (it is shown
    # once), the key it made stays listed and can be revoked.
    scope, data = Scope.of(principal), body.model_dump(mode="json")
    return await idempotent_response(
        ctx, scope, request, idempotency_key, data, produce, redact=without_keys
    )


@router.get(
    "",
    summary="List scanner keys, newest first (revoked ones included, never the keys)",
    responses=responses(ListObject[ScannerKeyObject], 400, 401, 403),
)
async def list_keys(
    ctx: ContextDep,
    principal: PrincipalDep,
    page: Annotated[PageRequest, paging("scanner_key", 100, 100)],
) -> JSONResponse:
    require_secret_key(principal)
    result = await ctx.repo.scanner_keys_page(principal.account_id, principal.mode, page)
    data = [key_object(doc) for doc in result.items]
    return JSONResponse(ListObject(data=data, has_more=result.has_more).model_dump(mode="json"))


@router.delete(
    "/{key_id}",
    summary="Revoke a scanner key: refused at once on every api replica",
    responses=responses(ScannerKeyObject, 401, 403, 404, 500),
)
async def revoke_key(ctx: ContextDep, principal: PrincipalDep, key_id: str) -> JSONResponse:
    require_secret_key(principal)
    revoked = await revoke_scanner_key(ctx.repo, ctx.principals, ctx.clock, principal, key_id)
    return JSONResponse(revoked.model_dump(mode="json"))
