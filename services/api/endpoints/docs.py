"""The interactive API reference, `/docs` (Swagger UI) and `/redoc` (ReDoc), and the files they
load from `/static/docs/`. Thin: the pages, their assets and their CSP are in
services/api/pages/api_docs.py (docs/api-docs.md). They replace FastAPI's own pages, which load
from a CDN (app.py turns those off).
"""

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from services.api.pages.api_docs import (
    ASSET_TYPES,
    DOCS_PATH,
    REDOC_PATH,
    DocsPage,
    asset,
    redoc_page,
    swagger_page,
)
from shared.errors import NotFound

router = APIRouter(include_in_schema=False)


def _urls(request: Request) -> tuple[str, str]:
    """The app's root path and its document's URL under it, as FastAPI's own pages build it."""
    prefix = str(request.scope.get("root_path", "")).rstrip("/")
    return prefix, f"{prefix}{request.app.openapi_url}"


def _answer(page: DocsPage) -> HTMLResponse:
    return HTMLResponse(page.html, headers=page.headers)


# HEAD too, as every page of Tessera answers it (curl -I, link checkers).
@router.api_route(DOCS_PATH, methods=["GET", "HEAD"])
async def swagger_ui(request: Request) -> HTMLResponse:
    return _answer(swagger_page(*_urls(request)))


@router.api_route(REDOC_PATH, methods=["GET", "HEAD"])
async def redoc(request: Request) -> HTMLResponse:
    return _answer(redoc_page(*_urls(request)))


@router.api_route("/static/docs/{name}", methods=["GET", "HEAD"])
async def docs_asset(name: str) -> Response:
    media_type = ASSET_TYPES.get(name)
    if media_type is None:
        raise NotFound("No such file.", code="resource_missing")
    headers = {"Cache-Control": "public, max-age=86400", "X-Content-Type-Options": "nosniff"}
    return Response(asset(name), media_type=media_type, headers=headers)
