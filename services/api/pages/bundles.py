"""The answers of a pass bundle's public URLs: its landing page `{site_url}/b/{id}` and its
.pkpasses `{site_url}/b/{id}.pkpasses` (docs/pages.md#pass-bundles).

A bundle's URLs are permanent URLs of each of its passes, so they follow the same rule as
`/p/{short_id}`: a pass whose template requires download links is left out (spec 4.1 rule 6),
and a bundle with nothing left answers the 404 page, as an unknown one does. The .pkpasses
holds each remaining pass's current file, as `/p/{short_id}/pass.pkpass` serves it, except the
voided ones (nobody adds a voided ticket; the page still shows them as voided). Events are
recorded per pass, after the response is sent, for GET only and never for bots, as on a pass's
own URLs.
"""

import logging
from collections.abc import Sequence
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse, Response
from starlette.background import BackgroundTask

from services.api.deps import ApiContext
from services.api.pages.bundle_view import build_bundle_view, bundle_css
from services.api.pages.filenames import attachment
from services.api.pages.headers import download_headers, page_headers
from services.api.pages.pkpasses import PKPASSES_TYPE, fitting, pkpasses_zip
from services.api.pages.platform import detect_platform, is_bot
from services.api.pages.qr import qr_svg
from services.api.pages.render import render_bundle
from services.api.pages.responses import not_found_response, preview
from services.api.pages.view import site_path, used_up
from shared.ids import has_prefix
from shared.messages import PassEventType
from shared.models import PassBundleRecord, PassRecord, TemplateRecord

log = logging.getLogger(__name__)

BundlePasses = list[tuple[PassRecord, TemplateRecord]]


async def bundle_passes(
    ctx: ApiContext, bundle_id: str
) -> tuple[PassBundleRecord, BundlePasses] | None:
    """The bundle and its passes that its URLs may show, in its order; None for an unknown
    bundle or one with nothing left to show."""
    if not has_prefix(bundle_id, "pass_bundle"):
        return None
    bundle = await ctx.issuer.pass_bundle_by_id(bundle_id)
    if bundle is None:
        return None
    templates: dict[str, TemplateRecord | None] = {}
    shown: BundlePasses = []
    for record in await ctx.issuer.passes_by_ids(bundle.pass_ids):
        if record.template_id not in templates:
            templates[record.template_id] = await ctx.issuer.template_by_id(record.template_id)
        template = templates[record.template_id]
        if template is not None and not template.require_download_link:
            shown.append((record, template))
    return (bundle, shown) if shown else None


async def bundle_page_response(
    ctx: ApiContext, request: Request, bundle: PassBundleRecord, passes: BundlePasses
) -> Response:
    site = ctx.settings.site_url
    platform = detect_platform(request.headers.get("user-agent"))
    prefix = site_path(site)
    previews = [
        await preview(ctx, record, template, path_prefix=prefix) for record, template in passes
    ]
    view = build_bundle_view(
        passes,
        site_url=site,
        page_url=f"{site}/b/{bundle.id}",
        path_prefix=prefix,
        views=previews,
    )
    qr = qr_svg(view.page_url) if platform == "desktop" and view.addable else None
    html = render_bundle(view, platform=platform, qr=qr, path_prefix=site_path(site))
    records = [record for record, _ in passes]
    metadata = {"platform": platform, "bundle_id": bundle.id}
    return HTMLResponse(
        html,
        headers=page_headers(bundle_css(view)),
        background=_events(ctx, request, records, "url_viewed", metadata),
    )


async def pkpasses_response(
    ctx: ApiContext, request: Request, bundle: PassBundleRecord, passes: BundlePasses
) -> Response:
    """The .pkpasses of the bundle's passes that are neither voided nor used up; the 404 page
    when none is."""
    served: list[PassRecord] = []
    files: list[bytes] = []
    for record, _ in passes:
        if record.voided or used_up(record):
            continue
        stored = await ctx.issuer.pass_file(record.id)
        if stored is None:
            log.warning("bundle %s: pass %s has no file; left out", bundle.id, record.id)
            continue
        served.append(record)
        files.append(stored.data)
    kept = fitting(files)
    if not kept:
        return not_found_response(ctx)
    served = served[: len(kept)]
    headers = download_headers("no-store") | {
        "Content-Disposition": attachment(passes[0][1], "pkpasses", "passes"),
    }
    metadata = {"wallet": "apple", "bundle_id": bundle.id}
    return Response(
        content=pkpasses_zip(kept),
        media_type=PKPASSES_TYPE,
        headers=headers,
        background=_events(ctx, request, served, "downloaded", metadata),
    )


def _events(
    ctx: ApiContext,
    request: Request,
    records: Sequence[PassRecord],
    event_type: PassEventType,
    metadata: dict[str, Any],
) -> BackgroundTask | None:
    if request.method != "GET" or is_bot(request.headers.get("user-agent")):
        return None
    return BackgroundTask(_record_all, ctx, records, event_type, metadata)


async def _record_all(
    ctx: ApiContext,
    records: Sequence[PassRecord],
    event_type: PassEventType,
    metadata: dict[str, Any],
) -> None:
    for record in records:
        await ctx.record_event(record, event_type, dict(metadata))
