"""The operator API (/admin/v1): accounts and API keys. Served only with TESSERA_ADMIN_TOKEN.

POST and PATCH take an Idempotency-Key like the v1 API, scoped to the operator.

Revoking a key and changing a plan answer only once every api replica dropped what it cached of
the key or the account (services/api/principals.py): the next request is judged afresh anywhere.
"""

from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, RootModel

from services.api import accounts, openapi
from services.api.deps import AdminDep, ApiContext, ContextDep, IdempotencyKey
from services.api.endpoints.common import idempotent_response, paging
from services.api.idempotency import OPERATOR, without_keys
from services.api.schemas import AccountCreate, AccountUpdate, ApiKeyCreate
from shared.clock import iso
from shared.errors import not_found
from shared.ids import has_prefix
from shared.pagination import PageRequest

router = APIRouter(prefix="/admin/v1", tags=["admin"], dependencies=[AdminDep])


@router.get("/openapi.json", include_in_schema=False)
async def operator_openapi(request: Request) -> JSONResponse:
    """The operator API's OpenAPI document (it is not in the public one)."""
    return JSONResponse(openapi.operator_document(request.app))


def _account_id(value: str) -> str:
    if not has_prefix(value, "account"):
        raise not_found("account", value)
    return value


async def _idempotent(
    ctx: ApiContext,
    request: Request,
    key: str | None,
    body: Any,
    status: int,
    run: Callable[[str], Awaitable[dict[str, Any]]],
) -> JSONResponse:
    """`run(command_id)`: the same command id on a retry that takes the key over after a 5xx,
    so what it makes is made once (an account, a key: ids derived from it)."""

    async def produce(command_id: str) -> BaseModel:
        return _Answer(await run(command_id))

    return await idempotent_response(
        ctx, OPERATOR, request, key, body, produce, status=status, redact=without_keys
    )


class _Answer(RootModel[dict[str, Any]]):
    """An operator answer (made here, by the api, which owns accounts and keys)."""


@router.post("/accounts", status_code=201, summary="Create an account with a test and a live key")
async def create_account(
    ctx: ContextDep, request: Request, body: AccountCreate, idempotency_key: IdempotencyKey = None
) -> JSONResponse:
    return await _idempotent(
        ctx,
        request,
        idempotency_key,
        body.model_dump(),
        201,
        lambda command_id: accounts.create_account(
            ctx.repo, ctx.clock, body.name, body.plan, made_by=command_id
        ),
    )


@router.get("/accounts", summary="List accounts, newest first")
async def list_accounts(
    ctx: ContextDep, page: Annotated[PageRequest, paging("account", 50, 100)]
) -> JSONResponse:
    result = await ctx.repo.accounts_page(page)
    data = [accounts.account_object(doc) for doc in result.items]
    return JSONResponse({"object": "list", "data": data, "has_more": result.has_more})


@router.get(
    "/accounts/{account_id}/api_keys",
    summary="List an account's API keys, revoked ones too (never the keys themselves)",
)
async def list_api_keys(
    ctx: ContextDep,
    account_id: str,
    page: Annotated[PageRequest, paging("api_key", 50, 100)],
) -> JSONResponse:
    await accounts.account_or_404(ctx.repo, _account_id(account_id))
    result = await ctx.repo.keys_page(account_id, page)
    data = [accounts.api_key_object(doc) for doc in result.items]
    return JSONResponse({"object": "list", "data": data, "has_more": result.has_more})


@router.get("/accounts/{account_id}", summary="Retrieve an account (keys are never shown)")
async def get_account(ctx: ContextDep, account_id: str) -> JSONResponse:
    doc = await accounts.account_or_404(ctx.repo, _account_id(account_id))
    return JSONResponse(accounts.account_object(doc))


@router.patch("/accounts/{account_id}", summary="Change an account's plan")
async def update_account(
    ctx: ContextDep,
    request: Request,
    account_id: str,
    body: AccountUpdate,
    idempotency_key: IdempotencyKey = None,
) -> JSONResponse:
    async def run(_command_id: str) -> dict[str, Any]:
        doc = await ctx.repo.set_plan(_account_id(account_id), body.plan)
        if doc is None:
            raise not_found("account", account_id)
        await ctx.principals.invalidate(account_id=account_id)
        return accounts.account_object(doc)

    return await _idempotent(ctx, request, idempotency_key, body.model_dump(), 200, run)


@router.post("/accounts/{account_id}/api_keys", status_code=201, summary="Create another key")
async def create_api_key(
    ctx: ContextDep,
    request: Request,
    account_id: str,
    body: ApiKeyCreate,
    idempotency_key: IdempotencyKey = None,
) -> JSONResponse:
    async def run(command_id: str) -> dict[str, Any]:
        await accounts.account_or_404(ctx.repo, _account_id(account_id))
        return await accounts.create_key(
            ctx.repo, ctx.clock, account_id, body.mode, made_by=command_id
        )

    return await _idempotent(ctx, request, idempotency_key, body.model_dump(), 201, run)


@router.delete("/api_keys/{key_id}", summary="Revoke a key")
async def revoke_api_key(ctx: ContextDep, key_id: str) -> JSONResponse:
    if not has_prefix(key_id, "api_key"):
        raise not_found("api key", key_id)
    doc = await ctx.repo.revoke_key(key_id, ctx.clock.now())
    if doc is None:
        raise not_found("api key", key_id)
    # Also when it was revoked before: a retry after a 500 here repeats the invalidation.
    await ctx.principals.invalidate(key_id=key_id)
    revoked_at = iso(doc["revoked_at"])
    return JSONResponse(
        {"id": key_id, "object": "api_key", "revoked": True, "revoked_at": revoked_at}
    )
