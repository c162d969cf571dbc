"""services/api/pages/barcodes.py: the pass's barcode preview as an inline SVG."""

import re

import pytest
import segno

from services.api.pages.barcodes import barcode_preview

MESSAGE = "TKT-<b>&-0042"


def test_qr_is_segnos_code_for_the_message() -> None:
    preview = barcode_preview("qr", MESSAGE, "0042")
    assert preview.svg is not None
    assert preview.svg.startswith('<svg role="img" aria-label="QR code of this pass"')
    expected = segno.make(MESSAGE, error="m", micro=False).svg_inline(scale=1, border=4)
    path = re.search(r'<path stroke="#000" d="([^"]+)"', preview.svg)
    assert path is not None
    assert path.group(1) in expected
    assert (preview.alt_text, preview.format_name) == ("0042", "QR code")


@pytest.mark.parametrize("fmt", ["aztec", "pdf417", "code128"])
def test_other_formats_are_inline_svg_elements_without_text_or_styles(fmt: str) -> None:
    preview = barcode_preview(fmt, MESSAGE, None)
    svg = preview.svg
    assert svg is not None
    assert svg.startswith('<svg role="img"')
    opening = svg.split(">", 1)[0]
    # Fit for an HTML page under the CSP: sized by CSS (a viewBox only), no prolog, no id
    # (a bundle page shows several), no style attribute, no text of the message.
    assert re.search(r'viewBox="0 0 \d+ \d+"', opening)
    assert " width=" not in opening
    for absent in ("<?xml", "<!DOCTYPE", ' id="', "style", "<text", "<desc", "TKT"):
        assert absent not in svg
    assert f"barcode-{fmt}" in svg


def test_a_message_the_symbology_cannot_carry_falls_back_to_text() -> None:
    # Code 128 carries Latin-1 only.
    preview = barcode_preview("code128", "チケット", None)
    assert preview.svg is None
    assert preview.message == "チケット"
