"""Public pass files under {site_url}: the .pkpass behind a pass's download_url."""

from fastapi import APIRouter
from fastapi.responses import Response

from services.api.deps import ContextDep
from shared.errors import NotFound

router = APIRouter(tags=["public"])
PKPASS_TYPE = "application/vnd.apple.pkpass"


@router.get("/p/{short_id}/pass.pkpass", summary="Download the signed .pkpass")
async def download_pkpass(ctx: ContextDep, short_id: str) -> Response:
    missing = NotFound("No pass at this address.")
    record = await ctx.issuer.pass_by_short_id(short_id)
    if record is None:
        raise missing
    template = await ctx.issuer.template_by_id(record.template_id)
    if template is None or template.require_download_link:
        raise missing
    stored = await ctx.issuer.pass_file(record.id)
    if stored is None:
        raise missing
    return Response(
        content=bytes(stored["data"]),
        media_type=PKPASS_TYPE,
        headers={
            "Content-Disposition": f'attachment; filename="{record.short_id}.pkpass"',
            "Cache-Control": "no-store",
        },
    )
