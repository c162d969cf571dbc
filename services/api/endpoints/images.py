"""Public images: what Google Wallet fetches by URL (it cannot take inline images).

`/t/{template_id}/logo.png` is the template's logo at its sharpest scale, and
`/t/{template_id}/google-logo.png` its square Google logo (design.google_logo), which Google
Wallet gets instead when there is one; `/assets/logo.png` is the placeholder used for loyalty
classes, which Google requires to have a logo. Template
logos are part of a pass's public face, so they need no key; template ids are made
unguessable (shared/ids.py), so one account's id never tells another's.
An archived template's logos stay: its passes remain valid (spec 3.3), and their pages and
Google classes and objects show them (Google refetches images by URL). The logo is served
cleaned (shared/png_clean.py): a template saved before images were cleaned may hold text
chunks or a decompression bomb.
"""

import asyncio
import logging

from fastapi import APIRouter
from fastapi.responses import Response

from services.api.deps import ContextDep
from shared.default_icon import default_icon_png
from shared.design import Design
from shared.design_images import clean_stored_png
from shared.errors import NotFound
from shared.ids import has_prefix

log = logging.getLogger(__name__)
router = APIRouter(tags=["public"])
# nosniff: a browser must never take these bytes for anything but a PNG (say, HTML).
_HEADERS = {
    "Cache-Control": "public, max-age=3600",
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "default-src 'none'",
}


@router.get("/t/{template_id}/logo.png", summary="A template's logo (for Google Wallet)")
async def template_logo(ctx: ContextDep, template_id: str) -> Response:
    design = await _design(ctx, template_id)
    logo = None if design is None else design.images.logo
    if logo is None:
        raise NotFound("No logo at this address.", code="resource_missing")
    _, encoded = logo.largest()
    return await _png(template_id, encoded, "logo")


@router.get("/t/{template_id}/google-logo.png", summary="A template's square Google logo")
async def template_google_logo(ctx: ContextDep, template_id: str) -> Response:
    design = await _design(ctx, template_id)
    if design is None or design.google_logo is None:
        raise NotFound("No logo at this address.", code="resource_missing")
    return await _png(template_id, design.google_logo, "google_logo")


async def _design(ctx: ContextDep, template_id: str) -> Design | None:
    """The design of the template, archived or not, or None."""
    template = None
    if has_prefix(template_id, "template"):
        template = await ctx.issuer.template_by_id(template_id)
    if template is None:
        return None
    return Design.from_stored(template.design)


async def _png(template_id: str, encoded: str, label: str) -> Response:
    try:
        # Cached after the first time; the first decodes, so off the event loop.
        clean = await asyncio.to_thread(clean_stored_png, encoded, label)
    except ValueError as exc:
        log.warning("template %s: its %s cannot be served: %s", template_id, label, exc)
        raise NotFound("No logo at this address.", code="resource_missing") from exc
    return Response(clean.data, media_type="image/png", headers=_HEADERS)


@router.get("/assets/logo.png", summary="The placeholder logo")
async def placeholder_logo() -> Response:
    return Response(default_icon_png(660), media_type="image/png", headers=_HEADERS)
