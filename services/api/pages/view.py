"""What the landing page shows of a pass: a preview in the template's colors, nothing more.

Only the fields the front of a pass shows (header, primary, secondary), each with the pass's
value or the template's default; back fields, holder email and metadata stay private.
"""

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from shared.design import Design
from shared.models import PassRecord, TemplateRecord

MAIN_SLOTS = ("header", "primary", "secondary")
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
    holder_name: str | None
    voided: bool
    has_google: bool

    @property
    def title(self) -> str:
        return self.logo_text or self.organization


def site_path(site_url: str) -> str:
    """The path part of {site_url} ("" or e.g. "/wallet"), for same-origin asset URLs."""
    return urlsplit(site_url).path.rstrip("/")


def build_view(record: PassRecord, template: TemplateRecord, *, path_prefix: str = "") -> PassView:
    design = Design.from_stored(template.design)
    slots: dict[str, list[FieldView]] = {slot: [] for slot in MAIN_SLOTS}
    for field in design.fields:
        if field.slot not in slots:
            continue
        value = record.field_values.get(field.key, field.default)
        if value:
            slots[field.slot].append(FieldView(field.key, field.label, value))
    # An archived template's logo answers 404 (endpoints/images.py): no broken image.
    logo = design.images.logo is not None and not template.archived
    return PassView(
        organization=design.organization_name,
        description=design.description,
        logo_text=design.logo_text,
        logo_url=f"{path_prefix}/t/{template.id}/logo.png" if logo else None,
        background=design.colors.background,
        foreground=design.colors.foreground,
        label_color=design.colors.label,
        header_fields=tuple(slots["header"]),
        primary_fields=tuple(slots["primary"]),
        secondary_fields=tuple(slots["secondary"]),
        holder_name=record.holder_name or None,
        voided=record.voided,
        # While Google refuses the object (retried), its save link would only show an error.
        has_google=record.google_save_url is not None and record.google_status != "failing",
    )


def pass_css(view: PassView, selector: str = ":root") -> str:
    """The one inline stylesheet: the template's colors as custom properties, on `selector`
    (a bundle's page sets each pass's on its own element; pages/bundles.py).

    Built only from #RRGGBB values (checked again here, so it is safe to emit unescaped); its
    SHA-256 goes into the Content-Security-Policy (headers.py), so it is emitted byte for byte.
    """
    background = _color(view.background, "#FFFFFF")
    foreground = _color(view.foreground, "#000000")
    label = _color(view.label_color, "#333333")
    return f"{selector}{{--pass-bg:{background};--pass-fg:{foreground};--pass-label:{label}}}"


def _color(value: str, fallback: str) -> str:
    return value if _HEX.fullmatch(value) else fallback
