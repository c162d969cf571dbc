"""A pass bundle's public URLs: `{site_url}/b/{id}.pkpasses` (every pass in one download for
Apple Wallet) and `{site_url}/b/{id}` (the order's landing page). Thin: resolve the bundle, then
let services/api/pages/bundles.py answer (docs/pages.md#pass-bundles).
"""

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from services.api.deps import ContextDep
from services.api.pages.bundles import bundle_page_response, bundle_passes, pkpasses_response
from services.api.pages.pkpasses import PKPASSES_TYPE
from services.api.pages.responses import not_found_response

router = APIRouter(tags=["public"])


# Declared before `/b/{bundle_id}`, whose parameter would also match "<id>.pkpasses".
@router.get(
    "/b/{bundle_id}.pkpasses",
    summary="Download a bundle's passes as one .pkpasses",
    response_class=Response,
    responses={200: {"content": {PKPASSES_TYPE: {}}}},
)
@router.head("/b/{bundle_id}.pkpasses", include_in_schema=False)
async def download_pkpasses(ctx: ContextDep, request: Request, bundle_id: str) -> Response:
    found = await bundle_passes(ctx, bundle_id)
    if found is None:
        return not_found_response(ctx)
    return await pkpasses_response(ctx, request, *found)


@router.get("/b/{bundle_id}", summary="A bundle's landing page", response_class=HTMLResponse)
@router.head("/b/{bundle_id}", include_in_schema=False)
async def bundle_page(ctx: ContextDep, request: Request, bundle_id: str) -> Response:
    found = await bundle_passes(ctx, bundle_id)
    if found is None:
        return not_found_response(ctx)
    return await bundle_page_response(ctx, request, *found)
