"""The landing page of a pass at its permanent url, `{site_url}/p/{short_id}`, and its stylesheet;
the staff scanner page at `{site_url}/scan` with its manifest, service worker and static files.

Thin: resolve the short_id, then let services/api/pages/responses.py answer (docs/pages.md);
the scanner's answers come from services/api/pages/scanner.py (docs/redemption.md).
"""

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

from services.api.deps import ContextDep
from services.api.pages.headers import scanner_page_headers, scanner_worker_headers
from services.api.pages.render import render_scanner, stylesheet
from services.api.pages.resolve import permanent_pass
from services.api.pages.responses import landing_response, not_found_response
from services.api.pages.scanner import ASSET_TYPES, ScannerUrls, asset, manifest, service_worker
from services.api.pages.view import site_path
from shared.errors import NotFound

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


@router.get("/scan", summary="The staff scanner page", response_class=HTMLResponse)
@router.head("/scan", include_in_schema=False)
async def scanner_page(ctx: ContextDep) -> Response:
    urls = ScannerUrls(site_path(ctx.settings.site_url))
    return HTMLResponse(render_scanner(urls), headers=scanner_page_headers())


@router.get("/scan/manifest.webmanifest", include_in_schema=False)
async def scanner_manifest(ctx: ContextDep) -> Response:
    urls = ScannerUrls(site_path(ctx.settings.site_url))
    headers = {"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"}
    return JSONResponse(manifest(urls), media_type="application/manifest+json", headers=headers)


@router.get("/scan/sw.js", include_in_schema=False)
async def scanner_service_worker(ctx: ContextDep) -> Response:
    urls = ScannerUrls(site_path(ctx.settings.site_url))
    return Response(
        service_worker(urls),
        media_type="text/javascript; charset=utf-8",
        headers=scanner_worker_headers(urls.page),
    )


@router.get("/static/scanner/{path:path}", include_in_schema=False)
async def scanner_asset(path: str) -> Response:
    media_type = ASSET_TYPES.get(path)
    if media_type is None:
        raise NotFound("No such file.", code="resource_missing")
    headers = {"Cache-Control": "public, max-age=86400", "X-Content-Type-Options": "nosniff"}
    return Response(asset(path), media_type=media_type, headers=headers)
