"""Downloads behind a pass's permanent URLs: the .pkpass (`download_url`) and the Google redirect.

Both are answered by services/api/pages/responses.py, which the expiring download links share:
the .pkpass is built and signed by the issuer once per pass version and stored, and served with
an ETag so a client that has this version gets 304; `/google` records the add intent and
redirects to the pass's Google Wallet save link.
"""

from fastapi import APIRouter, Request
from fastapi.responses import Response

from services.api.deps import ContextDep
from services.api.pages.resolve import permanent_pass
from services.api.pages.responses import (
    PKPASS_TYPE,
    google_redirect,
    not_found_response,
    pkpass_response,
)

router = APIRouter(tags=["public"])


@router.get(
    "/p/{short_id}/pass.pkpass",
    summary="Download the signed .pkpass",
    response_class=Response,
    responses={200: {"content": {PKPASS_TYPE: {}}}},
)
@router.head("/p/{short_id}/pass.pkpass", include_in_schema=False)
async def download_pkpass(ctx: ContextDep, request: Request, short_id: str) -> Response:
    found = await permanent_pass(ctx, short_id)
    if found is None:
        return not_found_response(ctx)
    record, template = found
    return await pkpass_response(ctx, request, record, template)


@router.get(
    "/p/{short_id}/google",
    summary="Save the pass to Google Wallet (302 to its save link)",
    response_class=Response,
    status_code=302,
)
@router.head("/p/{short_id}/google", include_in_schema=False)
async def save_to_google(ctx: ContextDep, request: Request, short_id: str) -> Response:
    found = await permanent_pass(ctx, short_id)
    if found is None:
        return not_found_response(ctx)
    record, _ = found
    return await google_redirect(ctx, request, record)
