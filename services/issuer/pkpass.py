"""Render and sign Apple Wallet `.pkpass` bundles.

A .pkpass is a zip of pass.json, images, manifest.json (SHA-1 of every other file) and
`signature`, a detached DER PKCS#7 signature of manifest.json made with the pass type
certificate and carrying Apple's WWDR intermediate.
"""

import base64
import binascii
import functools
import hashlib
import io
import json
import re
import struct
import zipfile
import zlib
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.serialization import pkcs7

from services.issuer.signing import SigningIdentity
from shared.design import Design, DesignField

APPLE_STYLES = ("eventTicket", "generic", "storeCard", "coupon", "boardingPass")

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
MIN_AUTH_TOKEN_LENGTH = 16  # Apple rejects shorter authentication tokens.

_SLOT_KEYS = (
    ("header", "headerFields"),
    ("primary", "primaryFields"),
    ("secondary", "secondaryFields"),
    ("auxiliary", "auxiliaryFields"),
    ("back", "backFields"),
)
_BARCODE_FORMATS = {
    "qr": "PKBarcodeFormatQR",
    "pdf417": "PKBarcodeFormatPDF417",
    "aztec": "PKBarcodeFormatAztec",
    "code128": "PKBarcodeFormatCode128",
}
_BARCODE_PLACEHOLDER = re.compile(r"\{(serial_number|short_id|field_values\.([A-Za-z0-9_]+))\}")
_SECONDARY_LIMIT = 4
_DEFAULT_ICON_RGB = (0x4A, 0x5A, 0x6A)
# A fixed timestamp keeps the zip bytes stable for identical content (only the signature's
# signing time varies between builds).
_ZIP_DATE_TIME = (1980, 1, 1, 0, 0, 0)
_RESERVED_NAMES = frozenset({"manifest.json", "signature"})


@dataclass(frozen=True)
class PassContent:
    apple_style: str  # one of APPLE_STYLES
    design: Design  # shared.design.Design
    serial_number: str
    short_id: str
    field_values: dict[str, str]
    holder_name: str | None
    authentication_token: str  # >= 16 chars
    web_service_url: str | None
    voided: bool

    def __post_init__(self) -> None:
        if self.apple_style not in APPLE_STYLES:
            raise ValueError(f"apple_style must be one of {APPLE_STYLES}, got {self.apple_style!r}")
        if not self.serial_number:
            raise ValueError("serial_number must be non-empty")
        if len(self.authentication_token) < MIN_AUTH_TOKEN_LENGTH:
            raise ValueError(
                f"authentication_token must be at least {MIN_AUTH_TOKEN_LENGTH} characters"
            )


def render_pass_json(content: PassContent, identity: SigningIdentity) -> dict[str, Any]:
    """Build the pass.json document for `content`, issued under `identity`."""
    design = content.design
    document: dict[str, Any] = {
        "formatVersion": 1,
        "passTypeIdentifier": identity.pass_type_identifier,
        "teamIdentifier": identity.team_identifier,
        "serialNumber": content.serial_number,
        "organizationName": design.organization_name,
        "description": design.description,
    }
    if design.logo_text is not None:
        document["logoText"] = design.logo_text
    document["foregroundColor"] = _rgb(design.colors.foreground)
    document["backgroundColor"] = _rgb(design.colors.background)
    document["labelColor"] = _rgb(design.colors.label)
    document["authenticationToken"] = content.authentication_token
    if content.web_service_url is not None:
        document["webServiceURL"] = content.web_service_url
    if content.voided:
        document["voided"] = True
    document[content.apple_style] = _style_dict(content)
    if design.barcode is not None:
        barcode: dict[str, str] = {
            "format": _BARCODE_FORMATS[design.barcode.format],
            "message": expand_barcode_message(design.barcode.message, content),
            "messageEncoding": "iso-8859-1",
        }
        if design.barcode.alt_text is not None:
            barcode["altText"] = design.barcode.alt_text
        document["barcodes"] = [barcode]
    return document


def expand_barcode_message(template: str, content: PassContent) -> str:
    """Replace `{serial_number}`, `{short_id}` and `{field_values.<key>}` in `template`."""

    def replace(match: re.Match[str]) -> str:
        if match.group(1) == "serial_number":
            return content.serial_number
        if match.group(1) == "short_id":
            return content.short_id
        return content.field_values.get(match.group(2), "")

    return _BARCODE_PLACEHOLDER.sub(replace, template)


def build_pkpass(content: PassContent, identity: SigningIdentity) -> bytes:
    """Render, sign and zip a complete .pkpass bundle."""
    pass_json = json.dumps(
        render_pass_json(content, identity), ensure_ascii=False, separators=(",", ":")
    ).encode("utf-8")
    files: dict[str, bytes] = {"pass.json": pass_json}
    images = content.design.images
    if images.icon is not None:
        icon = decode_png(images.icon, "icon")
        files["icon.png"] = icon
        files["icon@2x.png"] = icon
    else:
        files["icon.png"] = default_icon_png(29)
        files["icon@2x.png"] = default_icon_png(58)
    if images.logo is not None:
        files["logo.png"] = decode_png(images.logo, "logo")
    manifest = manifest_for(files)
    files["manifest.json"] = manifest
    files["signature"] = sign_manifest(manifest, identity)

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        # dicts keep insertion order: pass.json, images, manifest.json, signature.
        for name, data in files.items():
            info = zipfile.ZipInfo(name, date_time=_ZIP_DATE_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, data)
    return buffer.getvalue()


def manifest_for(files: dict[str, bytes]) -> bytes:
    """Return manifest.json: a JSON object mapping each file name to its SHA-1 hex digest."""
    reserved = _RESERVED_NAMES.intersection(files)
    if reserved:
        raise ValueError(f"the manifest cannot list {sorted(reserved)}")
    # SHA-1 is what Apple's manifest format specifies; the signature itself uses SHA-256.
    digests = {name: hashlib.sha1(data).hexdigest() for name, data in files.items()}  # noqa: S324
    return json.dumps(digests, sort_keys=True, separators=(",", ":")).encode("utf-8")


def sign_manifest(manifest: bytes, identity: SigningIdentity) -> bytes:
    """Return the detached DER PKCS#7 signature of `manifest` (the pkpass `signature` file)."""
    return (
        pkcs7.PKCS7SignatureBuilder()
        .set_data(manifest)
        .add_signer(identity.certificate, identity.private_key, hashes.SHA256())
        .add_certificate(identity.intermediate)
        .sign(
            serialization.Encoding.DER,
            [pkcs7.PKCS7Options.DetachedSignature, pkcs7.PKCS7Options.Binary],
        )
    )


def decode_png(encoded: str, name: str) -> bytes:
    """Decode a base64 PNG from a design; `name` only labels the error message."""
    try:
        # Whitespace is tolerated because wrapped (MIME-style) base64 is common in pasted JSON.
        data = base64.b64decode("".join(encoded.split()), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"image {name!r} is not valid base64") from exc
    if not data.startswith(PNG_SIGNATURE):
        raise ValueError(f"image {name!r} is not a PNG")
    return data


@functools.cache
def default_icon_png(size: int) -> bytes:
    """A solid-colour square PNG of `size` pixels, used when the design has no icon."""
    row = b"\x00" + bytes(_DEFAULT_ICON_RGB) * size  # filter byte 0 (None) + RGB pixels
    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)  # 8-bit truecolour
    return (
        PNG_SIGNATURE
        + _png_chunk(b"IHDR", header)
        + _png_chunk(b"IDAT", zlib.compress(row * size, 9))
        + _png_chunk(b"IEND", b"")
    )


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    crc = zlib.crc32(kind + data) & 0xFFFFFFFF
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)


def _rgb(hex_color: str) -> str:
    red, green, blue = (int(hex_color[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgb({red}, {green}, {blue})"


def _style_dict(content: PassContent) -> dict[str, Any]:
    style: dict[str, Any] = {}
    if content.apple_style == "boardingPass":
        transit = (content.design.transit_type or "generic").capitalize()
        style["transitType"] = f"PKTransitType{transit}"
    by_slot: dict[str, list[dict[str, str]]] = {slot: [] for slot, _ in _SLOT_KEYS}
    for field in content.design.fields:
        rendered = _render_field(field, content.field_values)
        if rendered is not None:
            by_slot[field.slot].append(rendered)
    has_holder_field = "holder_name" in content.design.field_keys()
    if (
        content.holder_name is not None
        and not has_holder_field
        and len(by_slot["secondary"]) < _SECONDARY_LIMIT
    ):
        by_slot["secondary"].append(
            {"key": "holder_name", "label": "Name", "value": content.holder_name}
        )
    for slot, json_key in _SLOT_KEYS:
        style[json_key] = by_slot[slot]
    return style


def _render_field(field: DesignField, values: dict[str, str]) -> dict[str, str] | None:
    value = values.get(field.key, field.default)
    if value is None:
        return None
    return {"key": field.key, "label": field.label, "value": value}
