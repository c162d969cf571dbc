"""The barcode preview of a pass's page: its first barcode as an inline SVG, made on the server.

QR codes come from segno (a runtime dependency, as for the handoff QR in qr.py). Aztec, PDF417
and Code 128 come from zxing-cpp's writer (Zint inside) when it is installed; without it the
page shows the message as text with a note, so a missing writer never breaks a page. The SVGs
hold only rectangles and paths (no text, no style attributes), so they pass the page's CSP and
carry nothing of the message as markup; their size comes from CSS (a viewBox only).
"""

import re
from dataclasses import dataclass
from typing import Any

import segno
from markupsafe import escape

_ZXING_FORMATS = {"aztec": "Aztec", "pdf417": "PDF417", "code128": "Code128"}
_SIZE = re.compile(r'<svg width="(\d+)" height="(\d+)"')
FORMAT_NAMES = {
    "qr": "QR code",
    "aztec": "Aztec code",
    "pdf417": "PDF417 code",
    "code128": "Code 128",
}


@dataclass(frozen=True)
class BarcodePreview:
    format: str
    message: str
    alt_text: str | None
    # None: no writer for this format here; the page shows the message as text.
    svg: str | None

    @property
    def format_name(self) -> str:
        return FORMAT_NAMES.get(self.format, self.format)


def barcode_preview(format: str, message: str, alt_text: str | None) -> BarcodePreview:
    label = f"{FORMAT_NAMES.get(format, format)} of this pass"
    try:
        svg = _svg(format, message)
    except ValueError:
        svg = None  # a message the symbology cannot carry (Code 128 is Latin-1 only)
    if svg is not None:
        svg = svg.replace("<svg ", f'<svg role="img" aria-label="{escape(label)}" ', 1)
    return BarcodePreview(format=format, message=message, alt_text=alt_text, svg=svg)


def _svg(format: str, message: str) -> str | None:
    if format == "qr":
        code = segno.make(message, error="m", micro=False)
        svg: str = code.svg_inline(
            scale=1,
            border=4,
            dark="#000000",
            light="#FFFFFF",
            omitsize=True,
            svgclass="barcode-code barcode-qr",
            lineclass=None,
        )
        return svg
    writer = _zxing()
    if writer is None or format not in _ZXING_FORMATS:
        return None
    try:
        code = writer.create_barcode(message, getattr(writer.BarcodeFormat, _ZXING_FORMATS[format]))
    except Exception as exc:  # zxing-cpp raises its own error types for unencodable input
        raise ValueError(str(exc)) from exc
    raw: str = code.to_svg(add_hrt=False, add_quiet_zones=True)
    return _inline(raw, format)


def _inline(raw: str, format: str) -> str | None:
    """Zint's standalone SVG document as an element for an HTML page: no prolog or doctype,
    a viewBox instead of a fixed size, no id (a bundle page shows several)."""
    start = raw.find("<svg ")
    size = _SIZE.search(raw)
    if start < 0 or size is None:
        return None
    svg = raw[start:]
    width, height = size.group(1), size.group(2)
    svg = svg.replace(
        size.group(0),
        f'<svg class="barcode-code barcode-{format}" viewBox="0 0 {width} {height}"',
        1,
    )
    svg = re.sub(r"\s*<desc>.*?</desc>", "", svg, flags=re.S)
    return svg.replace(' id="barcode"', "")


def _zxing() -> Any:
    try:
        import zxingcpp  # optional: without it non-QR formats show as text
    except ImportError:
        return None
    if not hasattr(zxingcpp, "create_barcode"):
        return None  # zxing-cpp before 2.3 only reads
    return zxingcpp
