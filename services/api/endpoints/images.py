"""Public images: what Google Wallet fetches by URL (it cannot take inline images).

`/t/{template_id}/logo.png` is the template's logo at its sharpest scale; `/assets/logo.png`
is the placeholder used for loyalty classes, which Google requires to have a logo. Template
logos are part of a pass's public face, so they need no key; ids are unguessable anyway.
"""

from fastapi import APIRouter
from fastapi.responses import Response

from services.api.deps import ContextDep
from services.issuer.images import default_icon_png
from shared.design import Design
from shared.design_images import decode_base64_png
from shared.errors import NotFound
from shared.ids import has_prefix

router = APIRouter(tags=["public"])
_CACHE = {"Cache-Control": "public, max-age=3600"}


@router.get("/t/{template_id}/logo.png", summary="A template's logo (for Google Wallet)")
async def template_logo(ctx: ContextDep, template_id: str) -> Response:
    template = None
    if has_prefix(template_id, "template"):
        template = await ctx.issuer.template_by_id(template_id)
    logo = None if template is None else Design.from_stored(template.design).images.logo
    if logo is None:
        raise NotFound("No logo at this address.")
    _, encoded = logo.largest()
    return Response(decode_base64_png(encoded), media_type="image/png", headers=_CACHE)


@router.get("/assets/logo.png", summary="The placeholder logo")
async def placeholder_logo() -> Response:
    return Response(default_icon_png(660), media_type="image/png", headers=_CACHE)
