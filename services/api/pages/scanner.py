"""The staff scanner page at `{site_url}/scan`: its assets, web app manifest and service worker.

The page (templates/scan.html, static/scanner/) is an installable web app that reads passes'
barcodes with the phone's camera and posts them to `POST /v1/scans` on its own origin
(docs/redemption.md). Everything it loads is served from here, so its CSP can forbid every
other origin; the barcode decoder is the vendored zxing-wasm build in static/scanner/zxing-wasm/
(`make vendor-scanner`).
"""

import functools
import hashlib
import json
from dataclasses import dataclass
from importlib import resources
from typing import Any

PAGE_PATH = "/scan"
_STATIC = "/static/scanner/"
_TEXT = "text/plain; charset=utf-8"

# Every file the page may load, by its path under static/scanner/, with its media type. Nothing
# else under that folder is served: a fixed list, not a directory listing.
ASSET_TYPES: dict[str, str] = {
    "scanner.js": "text/javascript; charset=utf-8",
    "scanner.css": "text/css; charset=utf-8",
    "icon.svg": "image/svg+xml",
    "zxing-wasm/zxing-reader.js": "text/javascript; charset=utf-8",
    "zxing-wasm/zxing_reader.wasm": "application/wasm",
    "zxing-wasm/LICENSE": _TEXT,
    "zxing-wasm/LICENSE-zxing-cpp": _TEXT,
    "zxing-wasm/NOTICE": _TEXT,
}
# What the service worker keeps for offline starts: the page and what it loads. The licence
# texts are linked, not needed to scan.
_SHELL_ASSETS = (
    "scanner.css",
    "scanner.js",
    "icon.svg",
    "zxing-wasm/zxing-reader.js",
    "zxing-wasm/zxing_reader.wasm",
)


@functools.cache
def asset(path: str) -> bytes:
    """The bytes of a file of ASSET_TYPES (KeyError for any other path)."""
    if path not in ASSET_TYPES:
        raise KeyError(path)
    folder = resources.files("services.api.pages").joinpath("static", "scanner")
    return folder.joinpath(*path.split("/")).read_bytes()


def asset_url(path: str, prefix: str = "") -> str:
    """Versioned by content, so a long cache lifetime never serves a stale file."""
    version = hashlib.sha256(asset(path)).hexdigest()[:12]
    return f"{prefix}{_STATIC}{path}?v={version}"


@dataclass(frozen=True)
class ScannerUrls:
    """The page's same-origin URLs, under the path of {site_url} ("" or e.g. "/wallet")."""

    prefix: str

    @property
    def page(self) -> str:
        return f"{self.prefix}{PAGE_PATH}"

    @property
    def manifest(self) -> str:
        return f"{self.page}/manifest.webmanifest"

    @property
    def service_worker(self) -> str:
        return f"{self.page}/sw.js"

    @property
    def scan_api(self) -> str:
        # The api serves the page and the scan API together, so a relative URL reaches the
        # same process (connect-src 'self') whatever host the site is served under.
        return f"{self.prefix}/v1/scans"

    def asset(self, path: str) -> str:
        return asset_url(path, self.prefix)

    def shell(self) -> list[str]:
        return [self.page, self.manifest] + [self.asset(path) for path in _SHELL_ASSETS]


def manifest(urls: ScannerUrls) -> dict[str, Any]:
    """The web app manifest: installed, the page opens full-screen in portrait at /scan."""
    return {
        "id": urls.page,
        "name": "Tessera Scanner",
        "short_name": "Scanner",
        "description": "Scan passes at the door or the till.",
        "start_url": urls.page,
        "scope": urls.page,
        "display": "standalone",
        "orientation": "portrait",
        "background_color": "#111418",
        "theme_color": "#111418",
        "icons": [
            {
                "src": urls.asset("icon.svg"),
                "sizes": "any",
                "type": "image/svg+xml",
                "purpose": "any",
            }
        ],
    }


def service_worker(urls: ScannerUrls) -> str:
    """static/scanner/sw.js with the shell's URLs and a cache name that changes with them."""
    shell = urls.shell()
    cache = "tessera-scan-" + hashlib.sha256(json.dumps(shell).encode()).hexdigest()[:12]
    body = resources.files("services.api.pages").joinpath("static", "scanner", "sw.js")
    # json.dumps of URLs built from checked values above: valid JavaScript literals.
    return (
        f"const CACHE = {json.dumps(cache)};\n"
        f"const SHELL = {json.dumps(shell)};\n"
        f"const PAGE = {json.dumps(urls.page)};\n" + body.read_text()
    )
