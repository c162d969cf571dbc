"""The answers of a pass's public URLs, for every URL family that resolves to a pass.

The permanent URLs (`/p/{short_id}`) and the expiring download links (`/l/{token}`) differ only
in how they find the pass; once found, both call these functions with the pass, its template and
their own base URL, which the buttons and the QR handoff point at. Events are recorded after the
response is sent (a holder never waits on NATS), for GET only and never for obvious bots.
"""

from datetime import datetime
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.background import BackgroundTask

from services.api.deps import ApiContext
from services.api.pages.brand import brand_css, build_brand
from services.api.pages.filed_view import build_filed_view, is_behind, pass_json_of
from services.api.pages.filenames import attachment
from services.api.pages.headers import download_headers, page_headers
from services.api.pages.platform import detect_platform, is_bot
from services.api.pages.qr import qr_svg
from services.api.pages.render import (
    MessageRenderer,
    render_expired,
    render_landing,
    render_not_found,
)
from services.api.pages.view import PassView, build_view, pass_css, site_path
from shared.errors import NotFound
from shared.http_date import dated, modified_since
from shared.ids import new_id
from shared.logs import request_id_var
from shared.messages import PassEventType, SignGoogleSaveLink
from shared.models import PassRecord, TemplateRecord

PKPASS_TYPE = "application/vnd.apple.pkpass"


async def landing_response(
    ctx: ApiContext,
    request: Request,
    record: PassRecord,
    template: TemplateRecord,
    base_url: str,
) -> Response:
    """The landing page; `base_url` is its own URL: `{site}/p/{short_id}` or `{site}/l/{token}`."""
    platform = detect_platform(request.headers.get("user-agent"))
    prefix = site_path(ctx.settings.site_url)
    view = await preview(ctx, record, template, path_prefix=prefix)
    qr = qr_svg(base_url) if platform == "desktop" and view.addable else None
    html = render_landing(view, platform=platform, page_url=base_url, qr=qr, path_prefix=prefix)
    return HTMLResponse(
        html,
        headers=page_headers(pass_css(view)),
        background=_event(ctx, request, record, "url_viewed", {"platform": platform}),
    )


async def preview(
    ctx: ApiContext, record: PassRecord, template: TemplateRecord, *, path_prefix: str = ""
) -> PassView:
    """The pass as its page previews it: from the template's design, or from the pass file
    while a design change has not reached this pass yet (filed_view.py)."""
    if is_behind(record, template):
        stored = await ctx.issuer.pass_file(record.id)
        pass_json = None if stored is None else pass_json_of(stored.data)
        if pass_json is not None:
            return build_filed_view(record, template, pass_json, path_prefix=path_prefix)
    return build_view(record, template, path_prefix=path_prefix)


async def pkpass_response(
    ctx: ApiContext, request: Request, record: PassRecord, template: TemplateRecord
) -> Response:
    """The signed .pkpass, revalidated by ETag / Last-Modified (a 304 records nothing)."""
    stored = await ctx.issuer.pass_file(record.id)
    if stored is None:
        return not_found_response(ctx, template)
    headers = download_headers("no-cache") | {
        "ETag": f'"{record.id}.{stored.version}"',
        # Date and Last-Modified as the wallet web service sends them: never later than Date.
        **dated(stored.last_modified, ctx.clock.now()),
    }
    if _not_modified(request, headers["ETag"], stored.last_modified):
        return Response(status_code=304, headers=headers)
    # Named after the organization, not the short_id: a download link must not reveal the
    # permanent address of the pass.
    headers["Content-Disposition"] = attachment(template, "pkpass", "pass")
    return Response(
        content=stored.data,
        media_type=PKPASS_TYPE,
        headers=headers,
        background=_event(ctx, request, record, "downloaded", {"wallet": "apple"}),
    )


async def google_redirect(ctx: ApiContext, request: Request, record: PassRecord) -> Response:
    """302 to the pass's Google Wallet save link, signed by the issuer (it holds the key) or
    reused from this replica's minute of links of this pass version (save_links.py),
    recording the add intent on the way."""
    if record.google_save_url is None:
        return not_found_response(ctx, await ctx.issuer.template_by_id(record.template_id))
    now = ctx.clock.now()
    url = ctx.save_links.get(record.id, record.version, now)
    if url is None:
        url = await _signed_save_link(ctx, record)
        if url is None:
            # The issuer signs no link for it (live Google credentials removed since it was
            # issued): the 404 page, as for a pass without Google Wallet.
            return not_found_response(ctx, await ctx.issuer.template_by_id(record.template_id))
        ctx.save_links.put(record.id, record.version, url, now)
    return RedirectResponse(
        url,
        status_code=302,
        headers=download_headers("no-store"),
        background=_event(ctx, request, record, "downloaded", {"wallet": "google"}),
    )


async def _signed_save_link(ctx: ApiContext, record: PassRecord) -> str | None:
    """The pass's save link signed now by the issuer (it holds the key), or None when it
    signs none."""
    query = SignGoogleSaveLink(
        command_id=new_id("command"),
        account_id=record.account_id,
        mode=record.mode,
        request_id=request_id_var.get(),
        pass_id=record.id,
    )
    try:
        link = await ctx.command(query)
    except NotFound:
        return None
    return link.url


def not_found_response(ctx: ApiContext, template: TemplateRecord | None = None) -> HTMLResponse:
    """404 page; it shows no pass data. `template`: a pass the caller may show is known (its
    file or Google link is missing), so the page carries that template's branding. Never pass
    it for a hidden pass (require_download_link): its 404 must look like an unknown one's."""
    return _message_page(ctx, render_not_found, 404, template)


def expired_response(ctx: ApiContext, template: TemplateRecord | None = None) -> HTMLResponse:
    """410 page for an expired download link: ask for a fresh one; it shows no pass data but
    the branding of the link's template (the link itself was genuine)."""
    return _message_page(ctx, render_expired, 410, template)


def _message_page(
    ctx: ApiContext, render: MessageRenderer, status: int, template: TemplateRecord | None
) -> HTMLResponse:
    prefix = site_path(ctx.settings.site_url)
    brand = None if template is None else build_brand(template, path_prefix=prefix)
    html = render(prefix, brand)
    styles = () if brand is None else (brand_css(brand),)
    return HTMLResponse(html, status_code=status, headers=page_headers(*styles))


def _event(
    ctx: ApiContext,
    request: Request,
    record: PassRecord,
    event_type: PassEventType,
    metadata: dict[str, Any],
) -> BackgroundTask | None:
    if request.method != "GET" or is_bot(request.headers.get("user-agent")):
        return None
    return BackgroundTask(ctx.record_event, record, event_type, metadata)


def _not_modified(request: Request, etag: str, modified: datetime) -> bool:
    if_none_match = request.headers.get("if-none-match")
    if if_none_match is not None:
        return etag in {tag.strip() for tag in if_none_match.split(",")} or if_none_match == "*"
    # Compared with the stored stamp, not the header, which may be the earlier Date.
    return not modified_since(request.headers.get("if-modified-since"), modified)
