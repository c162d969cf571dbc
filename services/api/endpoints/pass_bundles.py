"""/v1/pass_bundles: up to 10 passes of one order offered together (docs/api-decisions.md).

The issuer owns bundles (`CreatePassBundle`); the api checks the body and the ids' prefixes, and
reads bundles back through IssuerReads. Their public pages are endpoints/bundle_pages.py.
"""

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from services.api.bundle_objects import PassBundleObject
from services.api.deps import ContextDep, IdempotencyKey, PrincipalDep
from services.api.endpoints.common import require_id, send_command
from services.api.objects import responses
from services.api.schemas import PassBundleCreate
from shared.errors import not_found
from shared.ids import has_prefix
from shared.messages import CreatePassBundle

router = APIRouter(prefix="/v1/pass_bundles", tags=["pass bundles"])


@router.post(
    "",
    summary="Bundle up to 10 passes for one .pkpasses download and landing page",
    responses=responses(PassBundleObject, 400, 401, 403, 404, 409, 500),
)
async def create_pass_bundle(
    ctx: ContextDep,
    principal: PrincipalDep,
    request: Request,
    body: PassBundleCreate,
    idempotency_key: IdempotencyKey = None,
) -> JSONResponse:
    for index, pass_id in enumerate(body.pass_ids):
        # A wrong prefix names no pass: 404 without a database query, as in a path.
        if not has_prefix(pass_id, "pass"):
            raise not_found("pass", pass_id, f"pass_ids.{index}")
    data = body.model_dump(mode="json")
    site = ctx.settings.site_url
    return await send_command(
        ctx,
        principal,
        request,
        idempotency_key,
        data,
        lambda base: CreatePassBundle(**base, **data),
        lambda record: PassBundleObject.of(record, site),
    )


@router.get(
    "/{bundle_id}",
    summary="Retrieve a pass bundle",
    responses=responses(PassBundleObject, 401, 403, 404),
)
async def get_pass_bundle(ctx: ContextDep, principal: PrincipalDep, bundle_id: str) -> JSONResponse:
    require_id(bundle_id, "pass_bundle", "pass bundle")
    record = await ctx.issuer.pass_bundle(principal.account_id, principal.mode, bundle_id)
    if record is None:
        raise not_found("pass bundle", bundle_id)
    return JSONResponse(PassBundleObject.of(record, ctx.settings.site_url).model_dump(mode="json"))
