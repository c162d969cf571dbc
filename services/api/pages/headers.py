"""Security headers of the holder-facing responses (docs/pages.md).

Pages allow nothing but their own stylesheet, the one inline <style> whose hash they name, and
same-origin or data: images; they cannot be framed, post forms or leak their URL (which may
carry a download-link token) through the Referer header.
"""

import base64
import hashlib

_CSP = (
    "default-src 'none'; style-src 'self'{hashes}; img-src 'self' data:; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
_COMMON = {"Referrer-Policy": "no-referrer", "X-Content-Type-Options": "nosniff"}


def style_hash(css: str) -> str:
    digest = hashlib.sha256(css.encode()).digest()
    return f"'sha256-{base64.b64encode(digest).decode()}'"


def page_headers(*inline_styles: str) -> dict[str, str]:
    hashes = "".join(" " + style_hash(css) for css in inline_styles)
    return {
        **_COMMON,
        "Content-Security-Policy": _CSP.format(hashes=hashes),
        "Cache-Control": "no-store",
    }


def download_headers(cache_control: str) -> dict[str, str]:
    """For the .pkpass and the Google redirect: no Referer, no sniffing, the given caching."""
    return {**_COMMON, "Cache-Control": cache_control}
