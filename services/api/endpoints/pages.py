"""The landing page of a pass at its permanent url, `{site_url}/p/{short_id}`, and its stylesheet.

Thin: resolve the short_id, then let services/api/pages/responses.py answer (docs/pages.md).
"""

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from services.api.deps import ContextDep
from services.api.pages.render import stylesheet
from services.api.pages.resolve import permanent_pass
from services.api.pages.responses import landing_response, not_found_response

router = APIRouter(tags=["public"])


@router.get("/p/{short_id}", summary="A pass's landing page", response_class=HTMLResponse)
@router.head("/p/{short_id}", include_in_schema=False)
async def landing_page(ctx: ContextDep, request: Request, short_id: str) -> Response:
    found = await permanent_pass(ctx, short_id)
    if found is None:
        return not_found_response(ctx)
    record, template = found
    page_url = f"{ctx.settings.site_url}/p/{short_id}"
    return await landing_response(ctx, request, record, template, page_url)


@router.get("/static/pages.css", include_in_schema=False)
async def pages_stylesheet() -> Response:
    # The pages link it with ?v=<content hash>, so a long cache lifetime never serves stale CSS.
    headers = {"Cache-Control": "public, max-age=86400", "X-Content-Type-Options": "nosniff"}
    return Response(stylesheet(), media_type="text/css", headers=headers)
