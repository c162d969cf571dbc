"""The operator API (/admin/v1): accounts and API keys. Served only with TESSERA_ADMIN_TOKEN."""

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from services.api import accounts
from services.api.deps import AdminDep, ContextDep
from services.api.schemas import AccountCreate, AccountUpdate, ApiKeyCreate
from shared.errors import not_found
from shared.ids import has_prefix

router = APIRouter(prefix="/admin/v1", tags=["admin"], dependencies=[AdminDep])


def _account_id(value: str) -> str:
    if not has_prefix(value, "account"):
        raise not_found("account", value)
    return value


@router.post("/accounts", status_code=201, summary="Create an account with a test and a live key")
async def create_account(ctx: ContextDep, body: AccountCreate) -> JSONResponse:
    created = await accounts.create_account(ctx.repo, ctx.clock, body.name, body.plan)
    return JSONResponse(created, status_code=201)


@router.get("/accounts/{account_id}", summary="Retrieve an account (keys are never shown)")
async def get_account(ctx: ContextDep, account_id: str) -> JSONResponse:
    doc = await accounts.account_or_404(ctx.repo, _account_id(account_id))
    return JSONResponse(accounts.account_object(doc))


@router.patch("/accounts/{account_id}", summary="Change an account's plan")
async def update_account(ctx: ContextDep, account_id: str, body: AccountUpdate) -> JSONResponse:
    doc = await ctx.repo.set_plan(_account_id(account_id), body.plan)
    if doc is None:
        raise not_found("account", account_id)
    return JSONResponse(accounts.account_object(doc))


@router.post("/accounts/{account_id}/api_keys", status_code=201, summary="Create another key")
async def create_api_key(ctx: ContextDep, account_id: str, body: ApiKeyCreate) -> JSONResponse:
    await accounts.account_or_404(ctx.repo, _account_id(account_id))
    created = await accounts.create_key(ctx.repo, ctx.clock, account_id, body.mode)
    return JSONResponse(created, status_code=201)


@router.delete("/api_keys/{key_id}", summary="Revoke a key")
async def revoke_api_key(ctx: ContextDep, key_id: str) -> JSONResponse:
    if not has_prefix(key_id, "api_key"):
        raise not_found("api key", key_id)
    doc = await ctx.repo.revoke_key(key_id, ctx.clock.now())
    if doc is None:
        raise not_found("api key", key_id)
    return JSONResponse({"id": key_id, "object": "api_key", "revoked": True})
