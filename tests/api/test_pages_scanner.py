"""services/api/pages/scanner.py, the scanner's headers and page: URLs, manifest, service worker,
the vendored decoder and what the page may load (docs/redemption.md)."""

import hashlib
import json
import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from services.api.app import create_app
from services.api.config import ApiSettings
from services.api.pages.headers import scanner_page_headers, scanner_worker_headers
from services.api.pages.render import render_scanner
from services.api.pages.scanner import (
    ASSET_TYPES,
    ScannerUrls,
    asset,
    asset_url,
    manifest,
    service_worker,
)

ROOT = Path(__file__).resolve().parents[2]
SCANNER = ROOT / "services/api/pages/static/scanner"
VENDOR = SCANNER / "zxing-wasm"


def test_the_vendored_decoder_is_the_pinned_one() -> None:
    """Every vendored file matches SHA256SUMS, the script and the .wasm are one release, and
    that release is the one `make vendor-scanner` fetches and NOTICE names."""
    sums = {}
    for line in (VENDOR / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split("  ")
        sums[name] = digest
    assert set(sums) == {"zxing-reader.js", "zxing_reader.wasm", "LICENSE"}
    for name, digest in sums.items():
        assert hashlib.sha256((VENDOR / name).read_bytes()).hexdigest() == digest, name

    script = (VENDOR / "zxing-reader.js").read_text()
    embedded = re.search(r"ZXING_WASM_SHA256=`([0-9a-f]{64})`", script)
    assert embedded is not None
    assert embedded.group(1) == sums["zxing_reader.wasm"]
    pinned = re.search(r"^ZXING_WASM_VERSION := (\S+)$", (ROOT / "Makefile").read_text(), re.M)
    assert pinned is not None
    assert f"zxing-wasm@{pinned.group(1)}/" in script
    assert f"zxing-wasm {pinned.group(1)}" in (VENDOR / "NOTICE").read_text()
    assert "MIT License" in (VENDOR / "LICENSE").read_text()
    assert "Apache License" in (VENDOR / "LICENSE-zxing-cpp").read_text()


def test_exactly_the_listed_files_are_served() -> None:
    on_disk = {str(path.relative_to(SCANNER)) for path in SCANNER.rglob("*") if path.is_file()}
    # The worker is served at /scan/sw.js with its shell list; the hashes are for the Makefile.
    assert on_disk - set(ASSET_TYPES) == {"sw.js", "zxing-wasm/SHA256SUMS"}
    assert set(ASSET_TYPES) <= on_disk
    with pytest.raises(KeyError):
        asset("sw.js")
    with pytest.raises(KeyError):
        asset("../templates/scan.html")


def test_urls_are_versioned_and_follow_the_site_path() -> None:
    digest = hashlib.sha256(asset("scanner.js")).hexdigest()[:12]
    assert asset_url("scanner.js") == f"/static/scanner/scanner.js?v={digest}"
    urls = ScannerUrls("/wallet")
    assert urls.page == "/wallet/scan"
    assert urls.manifest == "/wallet/scan/manifest.webmanifest"
    assert urls.service_worker == "/wallet/scan/sw.js"
    assert urls.scan_api == "/wallet/v1/scans"
    assert all(url.startswith("/wallet/") for url in urls.shell())


def test_the_manifest_installs_the_page_in_its_own_scope() -> None:
    document = manifest(ScannerUrls("/wallet"))
    assert document["start_url"] == document["scope"] == document["id"] == "/wallet/scan"
    assert document["display"] == "standalone"
    assert [icon["src"] for icon in document["icons"]] == [ScannerUrls("/wallet").asset("icon.svg")]


def test_the_service_worker_keeps_the_app_shell_and_nothing_else() -> None:
    urls = ScannerUrls("")
    script = service_worker(urls)
    lines = script.splitlines()
    assert lines[1] == f"const SHELL = {json.dumps(urls.shell())};"
    assert lines[2] == 'const PAGE = "/scan";'
    assert not any("/v1/" in url for url in urls.shell())
    assert "/static/scanner/zxing-wasm/zxing_reader.wasm?v=" in lines[1]
    # A new shell (here: another site path) is a new cache, so old files are dropped.
    assert lines[0] != service_worker(ScannerUrls("/wallet")).splitlines()[0]
    # Only GETs of the shell's own URLs are answered from the cache.
    assert 'request.method !== "GET"' in script
    assert "SHELL.includes(url.pathname + url.search)" in script


def test_the_page_loads_only_its_own_files() -> None:
    html = render_scanner(ScannerUrls("/wallet"))
    assert 'data-scan-api="/wallet/v1/scans"' in html
    assert 'data-scope="/wallet/scan"' in html
    assert 'href="/wallet/scan/manifest.webmanifest"' in html
    sources = re.findall(r'<script src="([^"]+)"', html)
    assert sources == [
        ScannerUrls("/wallet").asset("zxing-wasm/zxing-reader.js"),
        ScannerUrls("/wallet").asset("scanner.js"),
    ]
    # Nothing the CSP would refuse: no inline script, style or handler, no other origin.
    assert html.count("<script") == 2
    assert "<style" not in html
    assert " style=" not in html
    assert not re.search(r"\son[a-z]+=", html)
    ours = ("scanner.js", "scanner.css", "icon.svg")
    for text in (html, (SCANNER / "sw.js").read_text(), *(asset(name).decode() for name in ours)):
        # The SVG's namespace is a name, not a request.
        text = text.replace('xmlns="http://www.w3.org/2000/svg"', "")
        assert not re.search(r"(https?:)?//\w", text), re.search(r".{40}//\w.{40}", text)


def test_the_headers_allow_exactly_what_the_page_needs() -> None:
    headers = scanner_page_headers()
    assert headers["Content-Security-Policy"] == (
        "default-src 'none'; script-src 'self' 'wasm-unsafe-eval'; style-src 'self'; "
        "img-src 'self'; connect-src 'self'; manifest-src 'self'; worker-src 'self'; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    )
    assert headers["Permissions-Policy"] == "camera=(self), microphone=(), geolocation=()"
    assert headers["Referrer-Policy"] == "no-referrer"
    worker = scanner_worker_headers("/scan")
    assert worker["Service-Worker-Allowed"] == "/scan"
    assert worker["Content-Security-Policy"] == "default-src 'none'; connect-src 'self'"


def test_the_routes_serve_each_file_with_its_type() -> None:
    """Over HTTP (no store or NATS needed for these), under a site with a path."""
    client = TestClient(create_app(ApiSettings(site_url="https://tickets.example/wallet")))
    page = client.get("/scan")
    assert page.status_code == 200
    assert page.headers["content-type"] == "text/html; charset=utf-8"
    assert (
        page.headers["content-security-policy"] == scanner_page_headers()["Content-Security-Policy"]
    )
    assert 'data-scan-api="/wallet/v1/scans"' in page.text
    assert client.head("/scan").status_code == 200

    manifest_response = client.get("/scan/manifest.webmanifest")
    assert manifest_response.headers["content-type"] == "application/manifest+json"
    assert manifest_response.json()["start_url"] == "/wallet/scan"
    worker = client.get("/scan/sw.js")
    assert worker.headers["content-type"] == "text/javascript; charset=utf-8"
    assert worker.headers["service-worker-allowed"] == "/wallet/scan"
    assert worker.headers["cache-control"] == "no-cache"

    for path, media_type in ASSET_TYPES.items():
        served = client.get(f"/static/scanner/{path}")
        assert served.status_code == 200, path
        assert served.headers["content-type"] == media_type, path
        assert served.headers["x-content-type-options"] == "nosniff"
        assert served.content == asset(path)
    for missing in ("sw.js", "zxing-wasm/SHA256SUMS", "nope.js", "../templates/scan.html"):
        refused = client.get(f"/static/scanner/{missing}")
        assert refused.status_code == 404, missing
        assert refused.json()["error"]["type"] == "not_found_error"
