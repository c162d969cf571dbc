"""Resolving a permanent pass URL (`/p/{short_id}`) to its pass and template.

A pass whose template has require_download_link on is not reachable this way (spec 4.1 rule 6):
it resolves to nothing, exactly like an unknown short_id. Both cases run the same two lookups,
so the answer time does not tell a hidden pass from a missing one.
"""

import hashlib
import re

from services.api.deps import ApiContext
from shared.models import PassRecord, TemplateRecord

# Wider than what short_slug makes (16 base62 characters); it only keeps junk away from the db.
_SHORT_ID = re.compile(r"[0-9A-Za-z]{1,64}")
_NO_TEMPLATE = "tmpl_none"


async def permanent_pass(
    ctx: ApiContext, short_id: str
) -> tuple[PassRecord, TemplateRecord] | None:
    record = None
    if _SHORT_ID.fullmatch(short_id):
        record = await ctx.issuer.pass_by_short_id(short_id)
    template = await ctx.issuer.template_by_id(
        record.template_id if record is not None else _NO_TEMPLATE
    )
    if record is None or template is None or template.require_download_link:
        return None
    return record, template


class LinkExpired(Exception):
    """The token names a link whose expires_at has passed (410, "ask for a fresh link").

    `template`: the template of the link's pass, so the page carries its branding (None when
    the pass or template is gone)."""

    def __init__(self, template: TemplateRecord | None = None):
        super().__init__("download link expired")
        self.template = template


async def linked_pass(ctx: ApiContext, token: str) -> tuple[PassRecord, TemplateRecord] | None:
    """Resolve a download-link token; LinkExpired once the api's clock reaches expires_at.

    Links ignore require_download_link (they are the way in while it is on). Every token,
    well-formed or not, costs the same hash and lookup, so timing tells nothing about it.
    """
    link = await ctx.issuer.download_link(hashlib.sha256(token.encode()).hexdigest())
    if link is None:
        return None
    record = await ctx.issuer.pass_by_id(link.pass_id)
    template = None if record is None else await ctx.issuer.template_by_id(record.template_id)
    if ctx.clock.now() >= link.expires_at:
        raise LinkExpired(template)
    if record is None or template is None:
        return None
    return record, template
