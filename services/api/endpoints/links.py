"""Expiring download links: `{site_url}/l/{token}` and its .pkpass and Google redirect.

Until expires_at a link behaves exactly like the permanent URL (landing page, .pkpass, Google
save redirect, QR handoff whose QR encodes the link); afterwards each answers 410 with a page
that asks for a fresh link and shows no pass data. Unknown tokens answer the 404 page.
"""

from collections.abc import Awaitable, Callable

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from services.api.deps import ApiContext, ContextDep
from services.api.pages.resolve import LinkExpired, linked_pass
from services.api.pages.responses import (
    expired_response,
    google_redirect,
    landing_response,
    not_found_response,
    pkpass_response,
)
from shared.models import PassRecord, TemplateRecord

router = APIRouter(tags=["public"])
Answer = Callable[[PassRecord, TemplateRecord], Awaitable[Response]]


async def _through_link(ctx: ApiContext, token: str, answer: Answer) -> Response:
    try:
        found = await linked_pass(ctx, token)
    except LinkExpired as expired:
        return expired_response(ctx, expired.template)
    if found is None:
        return not_found_response(ctx)
    return await answer(*found)


@router.get(
    "/l/{token}",
    summary="A pass's landing page, through a download link",
    response_class=HTMLResponse,
)
@router.head("/l/{token}", include_in_schema=False)
async def link_page(ctx: ContextDep, request: Request, token: str) -> Response:
    base_url = f"{ctx.settings.site_url}/l/{token}"

    async def answer(record: PassRecord, template: TemplateRecord) -> Response:
        return await landing_response(ctx, request, record, template, base_url)

    return await _through_link(ctx, token, answer)


@router.get("/l/{token}/pass.pkpass", summary="Download the .pkpass through a download link")
@router.head("/l/{token}/pass.pkpass", include_in_schema=False)
async def link_pkpass(ctx: ContextDep, request: Request, token: str) -> Response:
    async def answer(record: PassRecord, template: TemplateRecord) -> Response:
        return await pkpass_response(ctx, request, record, template)

    return await _through_link(ctx, token, answer)


@router.get("/l/{token}/google", summary="Save to Google Wallet through a download link")
@router.head("/l/{token}/google", include_in_schema=False)
async def link_google(ctx: ContextDep, request: Request, token: str) -> Response:
    async def answer(record: PassRecord, template: TemplateRecord) -> Response:
        return await google_redirect(ctx, request, record)

    return await _through_link(ctx, token, answer)
