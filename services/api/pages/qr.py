"""The QR handoff code: an inline SVG, made on the server, that encodes a page's own URL.

Black on white with the standard four-module quiet zone whatever the page's colors, so every
phone camera reads it; the size comes from CSS (the SVG has only a viewBox).
"""

import segno
from markupsafe import escape

QR_TITLE = "Scan with your phone to open this page there and add the pass (not the ticket)"


def qr_svg(url: str, *, title: str = QR_TITLE) -> str:
    code = segno.make(url, error="m", micro=False)
    svg: str = code.svg_inline(
        scale=1,
        border=4,
        dark="#000000",
        light="#FFFFFF",
        omitsize=True,
        title=title,
        svgclass="qr-code",
        lineclass=None,
    )
    # Name the graphic for screen readers too (an SVG <title> alone is not announced everywhere).
    return svg.replace("<svg ", f'<svg role="img" aria-label="{escape(title)}" ', 1)
