"""What a pass is in each wallet: the signed .pkpass content and the Google Wallet save link.

Kept apart from the command logic in service.py: this is where identities, the Google client and
the public URLs meet the records.
"""

import asyncio
import logging

from services.issuer.assets import pass_assets
from services.issuer.content import metadata_dates
from services.issuer.google.passes import GoogleWallet, object_digest
from services.issuer.google.passes import save_link as google_save_link
from services.issuer.identity import Identities
from services.issuer.pkpass import PassContent, SignedPass, sign_pass
from shared.design import Design
from shared.design_images import Images, template_image_version
from shared.errors import InvalidRequest
from shared.metrics import PKPASS_BUILD
from shared.models import PassRecord, TemplateRecord

log = logging.getLogger(__name__)


class WalletArtifacts:
    def __init__(
        self, identities: Identities, google: GoogleWallet, *, site_url: str, wallet_url: str
    ):
        self.identities = identities
        self._google = google
        self._site_url = site_url
        self._wallet_url = wallet_url

    def logo_url(self, template: TemplateRecord, design: Design) -> str | None:
        """Google fetches images by URL: the template's Google logo (square, as Google wants
        it) as the api serves it publicly, else its Apple logo, else None.

        Kept for an archived template, whose logos the api goes on serving: archiving must not
        rewrite the Google class of passes that stay valid. Versioned by the image (`?v=`):
        Google keeps its own copy of an image it fetched, so a new logo needs a new URL (the
        same URL sent again left every saved pass on the old logo, and a generic object,
        which holds the logo, was not even sent again).
        """
        at = (template.id, template.design_version)
        if design.google_logo is not None:
            version = template_image_version(*at, "google_logo", design.google_logo)
            return f"{self._site_url}/t/{template.id}/google-logo.png?v={version}"
        if design.images.logo is None:
            return None
        version = template_image_version(*at, "logo", design.images.logo)
        return f"{self._site_url}/t/{template.id}/logo.png?v={version}"

    @property
    def google(self) -> GoogleWallet:
        return self._google

    def attach_google(self, record: PassRecord, *, object_changed: bool = True) -> None:
        """Mark a new version of a pass as having a Google save link ("": the link is signed
        when a holder asks for it, by `save_link`, not with every version). With credentials,
        a changed object is also marked for the Google step, which upserts it after the commit
        (google/sync.py): Apple never waits on Google."""
        if not self._google_for(record):
            # Apple-only live credentials: no Google Wallet for this pass.
            record.google_save_url = None
            return
        record.google_save_url = ""
        if self._google.client is not None and object_changed:
            record.google_status = "pending"
            record.google_sync_due = record.updated_at
            record.google_error = None

    def save_link(self, template: TemplateRecord, record: PassRecord) -> str | None:
        """The pass's "Add to Google Wallet" link, signed now from the pass and its template
        as they are; None for a pass with no Google Wallet."""
        if record.google_save_url is None or not self._google_for(record):
            return None
        design = Design.from_stored(template.design)
        return google_save_link(
            self._google, template, record, logo_url=self.logo_url(template, design)
        )

    def _google_for(self, record: PassRecord) -> bool:
        return record.mode != "live" or self.identities.google_live

    def google_object_changed(
        self, template: TemplateRecord, design: Design, before: PassRecord, after: PassRecord
    ) -> bool:
        """Whether a pass re-rendered by a job (`before` as stored, `after` its new version
        from `template`) needs its Google object upserted: unless the object at Google
        (`before`'s synced digest) is the one `after` makes. Compared per pass, because what
        reaches the objects depends on the pass (its values, dates, the defaults it leaves
        to the design) and on every design change since it was last synced."""
        if self._google.client is None:
            return False
        if before.google_status != "synced" or before.google_object_digest is None:
            return True
        logo_url = self.logo_url(template, design)
        now = object_digest(self._google, template, after, logo_url=logo_url)
        return now != before.google_object_digest

    async def signed_pass(
        self,
        record: PassRecord,
        template: TemplateRecord,
        design: Design,
        *,
        images_optional: bool = False,
    ) -> SignedPass:
        """The signed pass. With `images_optional` (a void, a redaction: they must happen), a
        design image Wallet cannot use leaves the file without the design's images (the
        generated icon alone) instead of refusing."""
        content = self.content(record, template, design)
        with PKPASS_BUILD.time():
            try:
                # The first build of a design in this process decodes and cleans its images:
                # off the event loop (Pillow releases the GIL while it decodes).
                assets = await asyncio.to_thread(pass_assets, design, template.apple_style)
            except ValueError as exc:
                # Only a design saved before images were cleaned can get here.
                if images_optional:
                    log.warning(
                        "template %s: an image Wallet cannot use (%s); pass %s built without "
                        "the design's images",
                        template.id,
                        exc,
                        record.id,
                    )
                    bare = design.model_copy(update={"images": Images()})
                    assets = await asyncio.to_thread(pass_assets, bare, template.apple_style)
                    return sign_pass(content, self.identities.apple, assets)
                raise InvalidRequest(
                    f"Template '{template.id}' has an image Wallet cannot use: {exc}. Replace "
                    f"it with PATCH /v1/templates/{template.id}.",
                    code="template_image_invalid",
                ) from exc
            return sign_pass(content, self.identities.apple, assets)

    def content(self, record: PassRecord, template: TemplateRecord, design: Design) -> PassContent:
        dates = metadata_dates(record.metadata, strict=False)
        return PassContent(
            apple_style=template.apple_style,
            design=design,
            serial_number=record.serial_number,
            short_id=record.short_id,
            field_values=record.field_values,
            holder_name=record.holder_name,
            authentication_token=record.authentication_token,
            web_service_url=self._wallet_url,
            # A pass whose last redemption marked it used shows as voided (docs/redemption.md).
            voided=record.voided or record.used_up,
            # Valid per-pass dates in metadata override the design's (checked when written).
            expiration_date=dates.expiration_date,
            relevant_date=dates.relevant_date,
        )
