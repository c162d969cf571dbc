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


# The scanner page (docs/redemption.md) runs its own script and the vendored WebAssembly
# decoder ('wasm-unsafe-eval' compiles it, nothing allows eval), fetches the decoder and posts
# scans to its own origin, and registers its service worker and manifest from there. The camera
# stream is an object, not a URL, so it needs no media-src.
_SCANNER_CSP = (
    "default-src 'none'; script-src 'self' 'wasm-unsafe-eval'; style-src 'self'; "
    "img-src 'self'; connect-src 'self'; manifest-src 'self'; worker-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
# The service worker only fetches the app shell from its own origin into its cache.
_WORKER_CSP = "default-src 'none'; connect-src 'self'"


def scanner_page_headers() -> dict[str, str]:
    # no-cache, not no-store: the page holds no secret (the key stays in the browser's
    # storage), and revalidation keeps the installed app current.
    return {
        **_COMMON,
        "Content-Security-Policy": _SCANNER_CSP,
        "Permissions-Policy": "camera=(self), microphone=(), geolocation=()",
        "Cache-Control": "no-cache",
    }


def scanner_worker_headers(scope: str) -> dict[str, str]:
    """For /scan/sw.js, which controls `scope` (/scan itself sits above the script's folder)."""
    return {
        **_COMMON,
        "Content-Security-Policy": _WORKER_CSP,
        "Service-Worker-Allowed": scope,
        "Cache-Control": "no-cache",
    }


def download_headers(cache_control: str) -> dict[str, str]:
    """For the .pkpass and the Google redirect: no Referer, no sniffing, the given caching."""
    return {**_COMMON, "Cache-Control": cache_control}
