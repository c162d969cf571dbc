"""Public images: what Google Wallet fetches by URL (it cannot take inline images).

`/t/{template_id}/logo.png` is the template's logo at its sharpest scale; `/assets/logo.png`
is the placeholder used for loyalty classes, which Google requires to have a logo. Template
logos are part of a pass's public face, so they need no key; ids are unguessable anyway.
An archived template's logo is gone (404). The logo is served cleaned (shared/png_clean.py):
a template saved before images were cleaned may hold text chunks or a decompression bomb.
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
    template = None
    if has_prefix(template_id, "template"):
        template = await ctx.issuer.template_by_id(template_id)
    if template is None or template.archived:
        raise NotFound("No logo at this address.")
    logo = Design.from_stored(template.design).images.logo
    if logo is None:
        raise NotFound("No logo at this address.")
    _, encoded = logo.largest()
    try:
        # Cached after the first time; the first decodes, so off the event loop.
        clean = await asyncio.to_thread(clean_stored_png, encoded, "logo")
    except ValueError as exc:
        log.warning("template %s: its logo cannot be served: %s", template.id, exc)
        raise NotFound("No logo at this address.") from exc
    return Response(clean.data, media_type="image/png", headers=_HEADERS)


@router.get("/assets/logo.png", summary="The placeholder logo")
async def placeholder_logo() -> Response:
    return Response(default_icon_png(660), media_type="image/png", headers=_HEADERS)
