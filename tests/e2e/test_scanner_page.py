"""The staff scanner page at {site_url}/scan in a real headless Chromium (Debian's), with a camera.

Chromium's fake camera plays a Y4M video the test makes (tests/support/y4m.py): a phone showing
a real pass's QR code (the barcode message of its issued pass.json), then the phone taken away,
then the code again. The page must decode it with the vendored decoder, post it to the scan API,
show Accepted with the holder's name, and on the second showing Rejected, already redeemed.
Screenshots go to test-artifacts/ (scanner-*.png) for a person to look at.
"""

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import pytest
from PIL import Image
from playwright.sync_api import (
    Browser,
    BrowserContext,
    Page,
    Playwright,
    Request,
    Route,
    ViewportSize,
    sync_playwright,
)
from playwright.sync_api import expect as page_expect

from tests.support.api import TEMPLATE_BODY, create_template
from tests.support.browser import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS
from tests.support.emulated_iphone import InstalledPass
from tests.support.stack import Account, Stack
from tests.support.y4m import Symbology, phone_showing, write_y4m

# A camera without a person: grant it without asking, and film a fake device.
CAMERA_ARGS = ["--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream"]
# A phone held upright (iPhone 13's viewport): the page is made for it.
PHONE = ViewportSize(width=390, height=844)
FPS = 5
HOLDER = "Ada Lovelace"
ACCEPTED_GREEN = (0x0B, 0x6B, 0x2E)  # scanner.css
REJECTED_RED = (0xB3, 0x12, 0x1B)

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium (.ci/run)"
    ),
]


# ---------------------------------------------------------------------------------------------
# The page talks to the real scan API: `_scanner_key` creates a real scanner key, `_revoke`
# revokes it, and nothing is intercepted (the posts are still recorded, from the browser's side).
# FAKE_SCAN_API = True brings back the stand-in the page was first built against: `ScanApi`
# answers the posts inside the browser (page.route) as the scan API does.
FAKE_SCAN_API = False
# ---------------------------------------------------------------------------------------------


@dataclass
class Post:
    code: str
    location: str | None
    authorization: str | None
    idempotency_key: str | None


@dataclass
class ScanApi:
    """Records what the page posts to /v1/scans and, while FAKE_SCAN_API, answers it."""

    passes: dict[str, dict[str, Any]]  # barcode message -> the issued pass object
    posts: list[Post] = field(default_factory=list)
    status: int = 200  # what the stand-in answers; a test sets 401 to play a revoked key
    redeemed: set[str] = field(default_factory=set)
    answered: int = 0

    def install(self, page: Page) -> None:
        page.on("request", self._record)
        if FAKE_SCAN_API:
            page.route("**/v1/scans", self._answer)

    def _record(self, request: Request) -> None:
        if request.method == "POST" and request.url.endswith("/v1/scans"):
            body = json.loads(request.post_data or "{}")
            headers = request.headers
            self.posts.append(
                Post(
                    code=body.get("code"),
                    location=body.get("location"),
                    authorization=headers.get("authorization"),
                    idempotency_key=headers.get("idempotency-key"),
                )
            )

    def _answer(self, route: Route) -> None:
        if self.status != 200:
            error = {"type": "authentication_error", "code": None, "message": "Bad key."}
            body = {"error": {**error, "param": None}}
            route.fulfill(status=self.status, json=body)
            return
        self.answered += 1
        sent = json.loads(route.request.post_data or "{}")
        code = sent["code"]
        issued = self.passes.get(code)
        accepted = issued is not None and code not in self.redeemed
        self.redeemed.add(code)
        reason = None if accepted else "already_redeemed" if issued else "unknown_code"
        route.fulfill(
            status=200,
            json={
                "id": f"scan_fake{self.answered}",
                "object": "scan",
                "result": "accepted" if accepted else "rejected",
                "reason": reason,
                "pass_id": issued["id"] if issued else None,
                "code": code,
                "redemption_count": 1 if issued else 0,
                "redemptions_remaining": 0 if issued else None,
                "location": sent.get("location"),
                "metadata": {},
                "created_at": "2026-06-12T19:30:00Z",
                "pass": (
                    {
                        "id": issued["id"],
                        "holder_name": issued["holder_name"],
                        "template_id": issued["template_id"],
                        "field_values": issued["field_values"],
                    }
                    if issued
                    else None
                ),
            },
        )


def _scanner_key(stack: Stack, account: Account) -> tuple[str, str]:
    """A scanner key of the account's test mode: its id and the key itself."""
    if FAKE_SCAN_API:
        return "scnk_fake", "svc_scan_test_" + "x" * 32
    with stack.client(headers=account.headers()) as client:
        created = client.post("/v1/scanner_keys", json={"name": "North gate"})
    assert created.status_code == 200, created.text
    return str(created.json()["id"]), str(created.json()["key"])


def _revoke(stack: Stack, account: Account, key_id: str, scan_api: ScanApi) -> None:
    if FAKE_SCAN_API:
        scan_api.status = 401
        return
    with stack.client(headers=account.headers()) as client:
        assert client.delete(f"/v1/scanner_keys/{key_id}").status_code == 200


@pytest.fixture(scope="module")
def playwright() -> Iterator[Playwright]:
    with sync_playwright() as running:
        yield running


@pytest.fixture
def launch(playwright: Playwright) -> Iterator[Callable[[Path | None], Browser]]:
    """Start Chromium whose camera films `video` (None: Chromium's own moving test pattern)."""
    browsers: list[Browser] = []

    def start(video: Path | None) -> Browser:
        args = CAMERA_ARGS + ([f"--use-file-for-fake-video-capture={video}"] if video else [])
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS + args
        )
        browsers.append(browser)
        return browser

    yield start
    for browser in browsers:
        browser.close()


def _phone(browser: Browser) -> BrowserContext:
    # Service workers off: page.route does not see requests a service worker could answer.
    return browser.new_context(
        viewport=PHONE,
        device_scale_factor=2,
        is_mobile=True,
        has_touch=True,
        service_workers="block",
    )


def _issue(
    stack: Stack,
    account: Account,
    barcode: dict[str, str] | None = None,
    holder: str = HOLDER,
) -> tuple[dict[str, Any], str]:
    """A pass of an event template (QR of the serial number unless `barcode` says otherwise),
    and the barcode message its pass.json carries: what Wallet shows and a scanner reads."""
    design = {**TEMPLATE_BODY["design"], "barcode": barcode or {"format": "qr"}}
    with stack.client(headers=account.headers()) as client:
        template = create_template(client, TEMPLATE_BODY, design=design)
        response = client.post(
            "/v1/passes", json={"template_id": template["id"], "holder_name": holder}
        )
        assert response.status_code == 200, response.text
        issued: dict[str, Any] = response.json()
    pkpass = httpx2.get(issued["download_url"], timeout=30.0)
    assert pkpass.status_code == 200
    barcodes = InstalledPass(pkpass=pkpass.content, last_modified=None).pass_json["barcodes"]
    return issued, str(barcodes[0]["message"])


def _open_scanner(
    context: BrowserContext, stack: Stack, scan_api: ScanApi
) -> tuple[Page, list[str]]:
    """The page; the returned list collects console errors and requests to other origins."""
    problems: list[str] = []
    page = context.new_page()
    page.on(
        "console",
        lambda message: problems.append(message.text) if message.type == "error" else None,
    )
    page.on(
        "request",
        lambda request: (
            None
            if request.url.startswith(stack.base_url)
            else problems.append(f"external request {request.url}")
        ),
    )
    scan_api.install(page)
    response = page.goto(f"{stack.base_url}/scan")
    assert response is not None
    assert response.status == 200
    return page, problems


def _enter_key(page: Page, key: str, location: str | None = None) -> None:
    page.get_by_label("Scanner key").fill(key)
    if location is not None:
        page.get_by_label("Location").fill(location)
    page.get_by_role("button", name="Start scanning").click()


def _backdrop(shot: Path) -> tuple[int, int, int]:
    """The colour near the top of a screenshot: what fills the screen behind the answer."""
    with Image.open(shot) as image:
        pixel = image.convert("RGB").getpixel((image.width // 2, 40))
    assert isinstance(pixel, tuple)
    return (pixel[0], pixel[1], pixel[2])


def _screenshot(page: Page, name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / name
    page.screenshot(path=str(path))
    return path


def test_a_real_pass_is_accepted_then_rejected_as_already_redeemed(
    stack: Stack, launch: Callable[[Path | None], Browser], tmp_path: Path
) -> None:
    account = stack.new_account()
    issued, message = _issue(stack, account)
    # Two seconds of the phone held to the camera, then six without it; Chromium loops it.
    # The accepted answer, read at the latest near the end of those two seconds on a loaded
    # machine, closes three seconds later: the camera then still sees no phone for a while.
    video = tmp_path / "camera.y4m"
    held, away = phone_showing(message), phone_showing(None)
    write_y4m(video, [held] * (2 * FPS) + [away] * (6 * FPS), fps=FPS)
    scan_api = ScanApi(passes={message: issued})
    _, key = _scanner_key(stack, account)

    context = _phone(launch(video))
    try:
        page, problems = _open_scanner(context, stack, scan_api)
        _enter_key(page, key, location="North gate")
        result = page.locator("#result")

        page_expect(result).to_be_visible(timeout=20_000)
        # At once: an accepted answer closes by itself after three seconds.
        accepted_shot = _screenshot(page, "scanner-accepted.png")
        page_expect(result.locator(".result-title")).to_have_text("Accepted")
        page_expect(result).to_contain_text(HOLDER)
        page_expect(result).to_contain_text("No uses left")
        assert _backdrop(accepted_shot) == ACCEPTED_GREEN
        # One post for the whole time the code was held in view, the code exactly as issued.
        assert [post.code for post in scan_api.posts] == [message]
        assert page.locator("#accepted-count").inner_text() == "1"

        # The answer closes by itself; the phone comes back after the video's pause.
        page_expect(result).to_be_hidden(timeout=10_000)
        page_expect(result.locator(".result-title")).to_have_text("Rejected", timeout=20_000)
        page_expect(result).to_be_visible()
        page_expect(result.locator(".result-reason")).to_have_text("Already redeemed")
        page_expect(result).to_contain_text(HOLDER)
        assert _backdrop(_screenshot(page, "scanner-rejected.png")) == REJECTED_RED

        assert [post.code for post in scan_api.posts] == [message, message]
        assert {post.authorization for post in scan_api.posts} == {f"Bearer {key}"}
        assert {post.location for post in scan_api.posts} == {"North gate"}
        # A new scan, not a retry: each post has an Idempotency-Key of its own.
        assert len({post.idempotency_key for post in scan_api.posts}) == 2
        assert page.locator("#accepted-count").inner_text() == "1"
        assert page.evaluate("document.body.dataset.decoder") in {"zxing", "native"}
        # The key stays in the browser's storage, never in an address.
        assert key not in page.url
        assert page.evaluate("localStorage.getItem('tessera.scanner.key')") == key
        assert problems == []
    finally:
        context.close()


def test_pdf417_aztec_and_code128_passes_are_read_too(
    stack: Stack, launch: Callable[[Path | None], Browser], tmp_path: Path
) -> None:
    """The other three formats a template may use, each shown for five seconds in turn."""
    account = stack.new_account()
    shown: list[tuple[Symbology, dict[str, str], str]] = [
        ("pdf417", {"format": "pdf417", "message": "{serial_number}"}, "Grace Hopper"),
        ("aztec", {"format": "aztec", "message": "{serial_number}"}, "Alan Turing"),
        ("code128", {"format": "code128", "message": "{short_id}"}, "Edsger Dijkstra"),
    ]
    frames = []
    scan_api = ScanApi(passes={})
    for symbology, barcode, holder in shown:
        issued, message = _issue(stack, account, barcode=barcode, holder=holder)
        scan_api.passes[message] = issued
        frames += [phone_showing(message, symbology)] * 10
    video = tmp_path / "camera.y4m"
    write_y4m(video, frames, fps=2)

    context = _phone(launch(video))
    try:
        page, problems = _open_scanner(context, stack, scan_api)
        _enter_key(page, _scanner_key(stack, account)[1])
        # Each is accepted in turn: its answer closes by itself while the next one is shown.
        page_expect(page.locator("#accepted-count")).to_have_text("3", timeout=30_000)
        assert [post.code for post in scan_api.posts][:3] == list(scan_api.passes)
        assert problems == []
    finally:
        context.close()


SHELL_FILES = {
    "/static/scanner/scanner.css": "text/css; charset=utf-8",
    "/static/scanner/scanner.js": "text/javascript; charset=utf-8",
    "/static/scanner/icon.svg": "image/svg+xml",
    "/static/scanner/zxing-wasm/zxing-reader.js": "text/javascript; charset=utf-8",
    "/static/scanner/zxing-wasm/zxing_reader.wasm": "application/wasm",
}
SCANNER_CSP = (
    "default-src 'none'; script-src 'self' 'wasm-unsafe-eval'; style-src 'self'; "
    "img-src 'self'; connect-src 'self'; manifest-src 'self'; worker-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


def test_the_page_and_its_files_are_served_strictly_and_it_installs(
    stack: Stack, playwright: Playwright, tmp_path: Path
) -> None:
    with stack.client() as client:
        html = client.get("/scan")
        manifest = client.get("/scan/manifest.webmanifest")
        worker = client.get("/scan/sw.js")
        unknown = client.get("/static/scanner/sw.js")
    assert html.status_code == 200
    assert html.headers["content-type"] == "text/html; charset=utf-8"
    assert html.headers["content-security-policy"] == SCANNER_CSP
    assert html.headers["permissions-policy"] == "camera=(self), microphone=(), geolocation=()"
    assert html.headers["referrer-policy"] == "no-referrer"
    assert html.headers["x-content-type-options"] == "nosniff"
    assert manifest.headers["content-type"] == "application/manifest+json"
    assert manifest.json()["start_url"] == "/scan"
    assert worker.headers["content-type"] == "text/javascript; charset=utf-8"
    assert worker.headers["service-worker-allowed"] == "/scan"
    assert worker.headers["content-security-policy"] == "default-src 'none'; connect-src 'self'"
    # Only the listed files are served; the worker's template is not one of them.
    assert unknown.status_code == 404
    assert unknown.json()["error"]["type"] == "not_found_error"

    # A profile on disk: Chromium installs no web app from an incognito context.
    context = playwright.chromium.launch_persistent_context(
        tmp_path / "profile",
        executable_path=str(CHROMIUM),
        args=CHROMIUM_ARGS + CAMERA_ARGS,
        viewport=PHONE,
        device_scale_factor=2,
        is_mobile=True,
        has_touch=True,
    )
    loaded: dict[str, str] = {}
    context.on(
        "response",
        lambda response: loaded.__setitem__(
            response.url.split("?")[0].removeprefix(stack.base_url),
            response.headers.get("content-type", ""),
        ),
    )
    try:
        page, problems = _open_scanner(context, stack, ScanApi(passes={}))
        page_expect(page.get_by_role("heading", name="Connect this scanner")).to_be_visible()
        _screenshot(page, "scanner-setup.png")
        _enter_key(page, _scanner_key(stack, stack.new_account())[1])
        # The decoder is ready once the WebAssembly module compiled under the page's CSP.
        page_expect(page.locator("body")).to_have_attribute("data-decoder", "zxing")
        page_expect(page.locator("#camera-status")).to_contain_text("inside the frame")
        _screenshot(page, "scanner-camera.png")

        scope = page.evaluate("navigator.serviceWorker.ready.then(r => r.scope)")
        assert scope == f"{stack.base_url}/scan"
        kept = page.evaluate(
            """async () => {
                const names = await caches.keys();
                const cache = await caches.open(names[0]);
                return [names.length, (await cache.keys()).map(r => new URL(r.url).pathname)];
            }"""
        )
        # The app shell and nothing else: no API answer is ever kept.
        assert kept[0] == 1
        assert sorted(kept[1]) == sorted(["/scan", "/scan/manifest.webmanifest", *SHELL_FILES])

        cdp = context.new_cdp_session(page)
        assert cdp.send("Page.getInstallabilityErrors")["installabilityErrors"] == []
        assert cdp.send("Page.getAppManifest")["errors"] == []
        for path, content_type in SHELL_FILES.items():
            if path.endswith(".svg"):
                continue  # the icon is loaded by the manifest's reader, not by the page
            assert loaded.get(path) == content_type, (path, loaded)
        # No request left the origin and nothing broke the CSP (a violation is a console error).
        assert problems == []
    finally:
        context.close()


def test_keys_typed_codes_and_a_revoked_key(
    stack: Stack, launch: Callable[[Path | None], Browser]
) -> None:
    account = stack.new_account()
    issued, message = _issue(stack, account)
    scan_api = ScanApi(passes={message: issued})
    # Chromium's own test pattern as the camera: it shows no barcode, so every scan is typed.
    context = _phone(launch(None))
    try:
        page, problems = _open_scanner(context, stack, scan_api)
        # A secret key could issue and void passes: the page refuses to keep one.
        _enter_key(page, account.headers()["Authorization"].removeprefix("Bearer "))
        page_expect(page.get_by_role("alert")).to_contain_text("secret API key")
        assert page.evaluate("localStorage.getItem('tessera.scanner.key')") is None

        key_id, key = _scanner_key(stack, account)
        _enter_key(page, key)
        page_expect(page.locator("#mode")).to_have_text("Test mode")
        result = page.locator("#result")

        code = page.get_by_label("No camera? Type the pass's code")
        code.fill("NOT-A-PASS")
        page.get_by_role("button", name="Check").click()
        page_expect(result.locator(".result-reason")).to_have_text("Unknown code")
        page.get_by_role("button", name="Scan next").click()
        page_expect(result).to_be_hidden()

        code.fill(f"  {message} ")
        page.keyboard.press("Enter")
        page_expect(result.locator(".result-title")).to_have_text("Accepted")
        page_expect(result).to_contain_text(HOLDER)
        assert page.locator("#accepted-count").inner_text() == "1"
        page.keyboard.press("Escape")
        page_expect(result).to_be_hidden()
        assert [post.code for post in scan_api.posts] == ["NOT-A-PASS", message]

        # The key is revoked: the answer says so and the page asks for a new key.
        _revoke(stack, account, key_id, scan_api)
        code.fill(message)
        page.get_by_role("button", name="Check").click()
        page_expect(result).to_contain_text("Key not accepted")
        _screenshot(page, "scanner-key-refused.png")
        page.get_by_role("button", name="Enter a key").click()
        page_expect(page.get_by_role("heading", name="Connect this scanner")).to_be_visible()
        page_expect(page.get_by_role("alert")).to_contain_text("not accepted")
        # The only complaint is Chromium's own line for the 401.
        assert problems == [
            "Failed to load resource: the server responded with a status of 401 (Unauthorized)"
        ]
    finally:
        context.close()
