"""Public pass files under {site_url}: the .pkpass behind a pass's download_url.

The file is built and signed by the issuer once per pass version and stored; this endpoint only
serves it, with an ETag (the pass id and version) and Last-Modified, so a client or Apple Wallet
that already has this version gets 304 Not Modified.
"""

from datetime import UTC
from email.utils import format_datetime, parsedate_to_datetime
from typing import Annotated

from fastapi import APIRouter, Header
from fastapi.responses import Response

from services.api.deps import ContextDep
from shared.errors import NotFound

router = APIRouter(tags=["public"])
PKPASS_TYPE = "application/vnd.apple.pkpass"


def _not_modified(etag: str, modified: str, if_none_match: str | None, since: str | None) -> bool:
    if if_none_match is not None:
        return etag in {tag.strip() for tag in if_none_match.split(",")} or if_none_match == "*"
    if since is not None:
        try:
            return parsedate_to_datetime(since) >= parsedate_to_datetime(modified)
        except (TypeError, ValueError):
            return False
    return False


@router.get("/p/{short_id}/pass.pkpass", summary="Download the signed .pkpass")
async def download_pkpass(
    ctx: ContextDep,
    short_id: str,
    if_none_match: Annotated[str | None, Header(include_in_schema=False)] = None,
    if_modified_since: Annotated[str | None, Header(include_in_schema=False)] = None,
) -> Response:
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
    headers = {
        "ETag": f'"{record.id}.{stored["version"]}"',
        "Last-Modified": format_datetime(stored["created_at"].astimezone(UTC), usegmt=True),
        "Cache-Control": "no-cache",
    }
    if _not_modified(headers["ETag"], headers["Last-Modified"], if_none_match, if_modified_since):
        return Response(status_code=304, headers=headers)
    headers["Content-Disposition"] = f'attachment; filename="{record.short_id}.pkpass"'
    return Response(content=bytes(stored["data"]), media_type=PKPASS_TYPE, headers=headers)
