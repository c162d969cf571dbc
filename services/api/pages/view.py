"""What the landing page shows of a pass: a preview in the template's colors, nothing more.

Only the fields the front of a pass shows (header, primary, secondary, auxiliary), each with the
pass's value or the template's default (a date field formatted, dates.py), and its first
barcode (barcodes.py); back fields, holder email and metadata stay private. A test-mode pass
says so (`test_mode`). While a design change has not reached the pass yet, the preview comes
from the pass file instead (filed_view.py), so page and file never disagree.
"""

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from services.api.pages.barcodes import BarcodePreview, barcode_preview
from services.api.pages.dates import format_date_value
from shared.design import Design
from shared.design_images import template_image_version
from shared.models import PassRecord, TemplateRecord

MAIN_SLOTS = ("header", "primary", "secondary", "auxiliary")
_HEX = re.compile(r"#[0-9A-Fa-f]{6}")


@dataclass(frozen=True)
class FieldView:
    key: str
    label: str
    value: str


@dataclass(frozen=True)
class PassView:
    organization: str
    description: str
    logo_text: str | None
    logo_url: str | None
    background: str
    foreground: str
    label_color: str
    header_fields: tuple[FieldView, ...]
    primary_fields: tuple[FieldView, ...]
    secondary_fields: tuple[FieldView, ...]
    auxiliary_fields: tuple[FieldView, ...]
    holder_name: str | None
    voided: bool
    has_google: bool
    test_mode: bool = False
    # Every redemption it allows was used, and its wallet copy marked used (docs/pages.md).
    used: bool = False
    barcode: BarcodePreview | None = None
    # The language the pass's own text is written in (the page around it is English).
    language: str = "en"

    @property
    def title(self) -> str:
        return self.logo_text or self.organization

    @property
    def addable(self) -> bool:
        """Whether the page offers to add it to a wallet: not voided, not used up."""
        return not (self.voided or self.used)


def site_path(site_url: str) -> str:
    """The path part of {site_url} ("" or e.g. "/wallet"), for same-origin asset URLs."""
    return urlsplit(site_url).path.rstrip("/")


def build_view(record: PassRecord, template: TemplateRecord, *, path_prefix: str = "") -> PassView:
    design = Design.from_stored(template.design)
    slots: dict[str, list[FieldView]] = {slot: [] for slot in MAIN_SLOTS}
    for field in design.fields:
        if field.slot not in slots:
            continue
        # An empty value is no value, as in both wallets: the default shows.
        value = record.field_values.get(field.key) or field.default
        if not value:
            continue
        if field.date_style is not None or field.time_style is not None:
            value = format_date_value(value, field.date_style, field.time_style)
        slots[field.slot].append(FieldView(field.key, field.label, value))
    return PassView(
        organization=design.organization_name,
        description=design.description,
        logo_text=design.logo_text,
        logo_url=logo_url(template, design, path_prefix),
        background=design.colors.background,
        foreground=design.colors.foreground,
        label_color=design.colors.label,
        header_fields=tuple(slots["header"]),
        primary_fields=tuple(slots["primary"]),
        secondary_fields=tuple(slots["secondary"]),
        auxiliary_fields=tuple(slots["auxiliary"]),
        holder_name=record.holder_name or None,
        voided=record.voided,
        has_google=has_google(record),
        used=used_up(record),
        test_mode=record.mode == "test",
        barcode=first_barcode(record, design),
        language=design.source_language,
    )


def logo_url(template: TemplateRecord, design: Design, path_prefix: str) -> str | None:
    # An archived template's logo is served too (endpoints/images.py): its passes stay valid.
    if design.images.logo is None:
        return None
    # Versioned by the image: the logo is cached an hour, and a new one gets a new URL.
    version = template_image_version(
        template.id, template.design_version, "logo", design.images.logo
    )
    return f"{path_prefix}/t/{template.id}/logo.png?v={version}"


def used_up(record: PassRecord) -> bool:
    """Whether the pass used every redemption its limit allows and its wallet copy was marked
    used (`on_limit: "mark_used"`): the page then says so and offers no wallet. Not after the
    limit was raised past its count: scans admit it again."""
    limit = record.redemption_limit
    return record.used_up and limit is not None and record.redemption_count >= limit


def has_google(record: PassRecord) -> bool:
    # While Google refuses the object (retried), its save link would only show an error.
    return record.google_save_url is not None and record.google_status != "failing"


def first_barcode(record: PassRecord, design: Design) -> BarcodePreview | None:
    """The design's first barcode with the message the issuer rendered for this pass (what a
    scan looks up); none when the pass has no message (e.g. its placeholder field is empty)."""
    codes = design.barcode_list()
    if not codes or not record.barcode_message:
        return None
    return barcode_preview(codes[0].format, record.barcode_message, codes[0].alt_text)


def pass_css(view: PassView, selector: str = ":root") -> str:
    """The one inline stylesheet: the template's colors as custom properties, on `selector`
    (a bundle's page sets each pass's on its own element; pages/bundles.py).

    Built only from #RRGGBB values (checked again here, so it is safe to emit unescaped); its
    SHA-256 goes into the Content-Security-Policy (headers.py), so it is emitted byte for byte.
    """
    background = safe_color(view.background, "#FFFFFF")
    foreground = safe_color(view.foreground, "#000000")
    label = safe_color(view.label_color, "#333333")
    return f"{selector}{{--pass-bg:{background};--pass-fg:{foreground};--pass-label:{label}}}"


def safe_color(value: str, fallback: str) -> str:
    return value if _HEX.fullmatch(value) else fallback
