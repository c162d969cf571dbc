"""The preview of a pass whose file is older than its template's design (docs/pages.md).

A design change reaches a template's passes through a rollout job (services/issuer/jobs/
rollout.py); until it reaches a pass, its .pkpass still shows the design it was built from
(`PassRecord.design_version` below `TemplateRecord.design_version`). Designs are not kept per
version, so the preview is read back from that file's pass.json: organization, colors, front
fields (date styles included) and barcodes as the wallet will show them. It costs one read of
the file, and only while the rollout is under way. The logo is the template's current one: the
file's own is not served on its own URL.
"""

import io
import json
import re
import zipfile
from typing import Any

from services.api.pages.barcodes import BarcodePreview, barcode_preview
from services.api.pages.dates import format_date_value
from services.api.pages.view import FieldView, PassView, build_view, has_google, used_up
from shared.models import PassRecord, TemplateRecord

_STYLES = ("boardingPass", "coupon", "eventTicket", "generic", "storeCard")
_RGB = re.compile(r"rgb\(\s*(\d{1,3})\s*,\s*(\d{1,3})\s*,\s*(\d{1,3})\s*\)")
_BARCODE_FORMATS = {
    "PKBarcodeFormatQR": "qr",
    "PKBarcodeFormatPDF417": "pdf417",
    "PKBarcodeFormatAztec": "aztec",
    "PKBarcodeFormatCode128": "code128",
}


def is_behind(record: PassRecord, template: TemplateRecord) -> bool:
    """Whether the pass's file was built from an earlier design than the template's."""
    return record.design_version < template.design_version


def pass_json_of(pkpass: bytes) -> dict[str, Any] | None:
    try:
        with zipfile.ZipFile(io.BytesIO(pkpass)) as archive:
            document = json.loads(archive.read("pass.json"))
    except (KeyError, ValueError, zipfile.BadZipFile):
        return None
    return document if isinstance(document, dict) else None


def build_filed_view(
    record: PassRecord,
    template: TemplateRecord,
    pass_json: dict[str, Any],
    *,
    path_prefix: str = "",
) -> PassView:
    """The preview as the file shows it; what the file does not say comes from build_view."""
    current = build_view(record, template, path_prefix=path_prefix)
    style: dict[str, Any] = next(
        (pass_json[key] for key in _STYLES if isinstance(pass_json.get(key), dict)), {}
    )
    slots = {
        slot: _fields(style.get(f"{slot}Fields"), record)
        for slot in ("header", "primary", "secondary", "auxiliary")
    }
    return PassView(
        organization=_text(pass_json.get("organizationName")) or current.organization,
        description=_text(pass_json.get("description")) or current.description,
        logo_text=_text(pass_json.get("logoText")),
        logo_url=current.logo_url,
        background=_hex(pass_json.get("backgroundColor"), "#FFFFFF"),
        foreground=_hex(pass_json.get("foregroundColor"), "#000000"),
        label_color=_hex(pass_json.get("labelColor"), "#333333"),
        header_fields=slots["header"],
        primary_fields=slots["primary"],
        secondary_fields=slots["secondary"],
        auxiliary_fields=slots["auxiliary"],
        holder_name=current.holder_name,
        voided=record.voided,
        has_google=has_google(record),
        used=used_up(record),
        test_mode=current.test_mode,
        barcode=_barcode(pass_json.get("barcodes")),
        language=current.language,
    )


def _fields(raw: object, record: PassRecord) -> tuple[FieldView, ...]:
    if not isinstance(raw, list):
        return ()
    shown = []
    for field in raw:
        if not isinstance(field, dict) or "value" not in field:
            continue
        key, value = _text(field.get("key")) or "", _text(field.get("value"))
        if not value:
            continue
        # The issuer adds the holder's name as a field; the page shows it on its own line.
        if key == "holder_name" and value == record.holder_name:
            continue
        date_style, time_style = _style(field.get("dateStyle")), _style(field.get("timeStyle"))
        if date_style is not None or time_style is not None:
            value = format_date_value(value, date_style, time_style)
        shown.append(FieldView(key, _text(field.get("label")) or "", value))
    return tuple(shown)


def _barcode(raw: object) -> BarcodePreview | None:
    if not isinstance(raw, list) or not raw or not isinstance(raw[0], dict):
        return None
    first = raw[0]
    format = _BARCODE_FORMATS.get(str(first.get("format")))
    message = _text(first.get("message"))
    if format is None or not message:
        return None
    return barcode_preview(format, message, _text(first.get("altText")))


def _style(raw: object) -> str | None:
    """ "PKDateStyleShort" -> "short"."""
    if isinstance(raw, str) and raw.startswith("PKDateStyle"):
        return raw.removeprefix("PKDateStyle").lower()
    return None


def _text(raw: object) -> str | None:
    if raw is None or isinstance(raw, (dict, list)):
        return None
    return str(raw)


def _hex(raw: object, fallback: str) -> str:
    match = _RGB.fullmatch(raw) if isinstance(raw, str) else None
    if match is None:
        return fallback
    channels = [min(int(part), 255) for part in match.groups()]
    return "#" + "".join(f"{channel:02X}" for channel in channels)
