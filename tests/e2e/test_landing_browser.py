"""The landing page in a real headless Chromium (Debian's), driven by Playwright.

Desktop and iPhone viewports and user agents: the buttons each one shows, the QR code decoded
from the desktop screenshot (zxing-cpp) and the .pkpass that a click on the Apple button
downloads, verified with openssl. Screenshots go to test-artifacts/ for a person to look at.
"""

import base64
import io
import shutil
import subprocess
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
import zxingcpp
from PIL import Image, ImageDraw
from playwright.sync_api import Browser, BrowserContext, Page, Playwright

from tests.support.api import TEMPLATE_BODY, create_template, ok
from tests.support.browser import ARTIFACTS, BROWSER_MARKS, chromium, running_playwright
from tests.support.inproc_api import ManualClock, running_api
from tests.support.stack import Account, Stack
from tests.support.user_agents import ANDROID, DESKTOP

pytestmark = BROWSER_MARKS


@pytest.fixture(scope="module")
def playwright() -> Iterator[Playwright]:
    with running_playwright() as running:
        yield running


@pytest.fixture(scope="module")
def browser(playwright: Playwright) -> Iterator[Browser]:
    with chromium(playwright) as launched:
        yield launched


@pytest.fixture(scope="module")
def iphone(playwright: Playwright) -> dict[str, Any]:
    """Playwright's iPhone 13: viewport, scale, touch and Safari's User-Agent."""
    device = dict(playwright.devices["iPhone 13"])
    device.pop("default_browser_type", None)
    return device


def _logo(scale: int) -> str:
    """A 50-point square logo at `scale`: a rounded orange square with a white ring."""
    size = 50 * scale
    image = Image.new("RGBA", (size, size), (0, 0, 0, 0))
    draw = ImageDraw.Draw(image)
    draw.rounded_rectangle((0, 0, size - 1, size - 1), radius=12 * scale, fill=(255, 122, 47))
    ring = (13 * scale, 13 * scale, 37 * scale, 37 * scale)
    draw.ellipse(ring, outline=(255, 255, 255), width=5 * scale)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


def _issue(stack: Stack, account: Account, **body: Any) -> dict[str, Any]:
    design = {
        **TEMPLATE_BODY["design"],
        "logo_text": "Acme Live",
        "colors": {"background": "#1B2A4A", "foreground": "#FFFFFF", "label": "#F6C177"},
        "images": {"logo": {"x1": _logo(1), "x3": _logo(3)}},
        "fields": [
            {"key": "date", "label": "Date", "slot": "header", "default": "12 Jun"},
            {"key": "seat", "label": "Seat", "slot": "primary", "default": "GA"},
            {"key": "gate", "label": "Gate", "slot": "secondary", "default": "B"},
            {"key": "door", "label": "Doors", "slot": "secondary", "default": "19:30"},
        ],
    }
    with stack.client(headers=account.headers()) as client:
        template = create_template(client, TEMPLATE_BODY, design=design)
        response = client.post(
            "/v1/passes",
            json={
                "template_id": template["id"],
                "holder_name": "Ada Lovelace",
                "field_values": {"seat": "C3"},
                **body,
            },
        )
    assert response.status_code == 200, response.text
    issued: dict[str, Any] = response.json()
    return issued


def _open(context: BrowserContext, url: str, stack: Stack) -> tuple[Page, list[str]]:
    """Load the page; the returned list collects console errors and requests to other origins."""
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
            if request.url.startswith((stack.base_url, "data:"))
            else problems.append(f"external request {request.url}")
        ),
    )
    response = page.goto(url)
    assert response is not None
    assert response.status == 200
    return page, problems


def _screenshot(page: Page, name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / name
    page.screenshot(path=str(path), full_page=True)
    return path


def _drawn_codes(page: Page, name: str, wanted: set[tuple[str, str]]) -> set[tuple[str, str]]:
    """The codes zxing reads in a screenshot of the page, as (format, text). While they are
    not `wanted`, each figure that draws a code is read from a screenshot of its own too, and
    the page is shot again, up to three times: zxing once read only one of two codes in a
    whole-page frame, and once, in CI, missed a PDF417 three times in a row (the page is the
    same each time)."""
    found: set[tuple[str, str]] = set()
    for attempt in range(3):
        page.evaluate("() => document.fonts.ready")
        found = _codes_in(_screenshot(page, name))
        for n, figure in enumerate(page.locator("figure.handoff, figure.pass-barcode").all()):
            if found == wanted:
                break
            if not figure.is_visible():  # the handoff of a phone's page, say
                continue
            alone = ARTIFACTS / f"{attempt}-{n}-{name}"
            figure.screenshot(path=str(alone))
            found |= _codes_in(alone)
        if found == wanted:
            break
    return found


def _codes_in(shot: Path) -> set[tuple[str, str]]:
    return {(str(code.format), code.text) for code in zxingcpp.read_barcodes(Image.open(shot))}


def _verify_pkpass(data: bytes, folder: Path, root_ca: Path) -> None:
    openssl = shutil.which("openssl")
    assert openssl is not None, "openssl is required"
    zipfile.ZipFile(io.BytesIO(data)).extractall(folder)
    result = subprocess.run(
        [
            openssl, "cms", "-verify", "-binary", "-inform", "DER",
            "-in", str(folder / "signature"), "-content", str(folder / "manifest.json"),
            "-CAfile", str(root_ca), "-purpose", "any", "-out", "/dev/null",
        ],
        capture_output=True,
        check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr.decode()


def test_desktop_shows_both_buttons_and_a_qr_code_of_the_page(
    stack: Stack, browser: Browser
) -> None:
    issued = _issue(stack, stack.new_account())
    context = browser.new_context(viewport={"width": 1280, "height": 800}, user_agent=DESKTOP)
    try:
        page, problems = _open(context, issued["url"], stack)
        apple = page.get_by_role("link", name="Add to Apple Wallet")
        google = page.get_by_role("link", name="Save to Google Wallet")
        assert apple.is_visible()
        assert google.is_visible()
        assert page.get_by_role("heading", level=1).inner_text() == "Concert ticket"
        assert page.locator(".pass-logo").evaluate("img => img.naturalWidth") == 150
        # Keyboard: the first Tab reaches the first button, and the focus is visible.
        page.keyboard.press("Tab")
        focused = page.evaluate("document.activeElement.dataset.wallet")
        assert focused == "apple"
        outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
        assert outline == "solid"
        # The handoff QR opens the page; the pass's own QR (its preview) carries the serial.
        qr = str(zxingcpp.BarcodeFormat.QRCode)
        wanted = {(qr, issued["url"]), (qr, issued["serial_number"])}
        assert _drawn_codes(page, "landing-desktop.png", wanted) == wanted
        assert problems == []
    finally:
        context.close()


def test_iphone_shows_the_apple_button_and_downloads_a_signed_pkpass(
    stack: Stack, browser: Browser, iphone: dict[str, Any], tmp_path: Path
) -> None:
    issued = _issue(stack, stack.new_account())
    context = browser.new_context(**iphone)
    try:
        page, problems = _open(context, issued["url"], stack)
        apple = page.get_by_role("link", name="Add to Apple Wallet")
        assert apple.is_visible()
        assert page.get_by_role("link", name="Save to Google Wallet").count() == 0
        assert page.locator(".qr-code").count() == 0
        assert page.get_by_text("Ada Lovelace").first.is_visible()
        _screenshot(page, "landing-iphone.png")
        with page.expect_download() as download_info:
            apple.click()
        download = download_info.value
        assert download.suggested_filename == "acme-live.pkpass"
        saved = tmp_path / "download.pkpass"
        download.save_as(saved)
        assert problems == []
    finally:
        context.close()
    _verify_pkpass(saved.read_bytes(), tmp_path / "unzipped", stack.signing_dir / "root-ca.pem")


def test_android_voided_and_missing_pages_render(stack: Stack, browser: Browser) -> None:
    """Screenshots of the other states, for a person to judge; each shows what it should."""
    account = stack.new_account()
    issued = _issue(stack, account)
    context = browser.new_context(
        viewport={"width": 412, "height": 915}, user_agent=ANDROID, is_mobile=True
    )
    try:
        page, problems = _open(context, issued["url"], stack)
        assert page.get_by_role("link", name="Save to Google Wallet").is_visible()
        assert page.get_by_role("link", name="Add to Apple Wallet").count() == 0
        _screenshot(page, "landing-android.png")

        with stack.client(headers=account.headers()) as client:
            assert client.delete(f"/v1/passes/{issued['id']}").status_code == 200
        page.reload()
        assert page.get_by_role("heading", name="This pass has been voided").is_visible()
        assert page.get_by_role("link").count() == 0
        _screenshot(page, "landing-voided.png")
        assert problems == []

        missing = page.goto(f"{stack.base_url}/p/ZZZZZZZZZZZZZZZZ")
        assert missing is not None
        assert missing.status == 404
        assert page.get_by_role("heading", name="We can't find this pass").is_visible()
        _screenshot(page, "landing-not-found.png")
        # The only complaint is the 404 status itself; its stylesheet loaded.
        assert problems == [
            "Failed to load resource: the server responded with a status of 404 (Not Found)"
        ]
    finally:
        context.close()


STARTS = "2031-10-08T20:00:00+02:00"
PREVIEW_FIELDS = [
    {"key": "date", "label": "Date", "slot": "header", "date_style": "short", "default": STARTS},
    {"key": "seat", "label": "Seat", "slot": "primary", "default": "GA"},
    {
        "key": "starts",
        "label": "Starts",
        "slot": "secondary",
        "date_style": "medium",
        "time_style": "short",
        "default": STARTS,
    },
    {"key": "gate", "label": "Gate", "slot": "secondary", "default": "B"},
    {"key": "row", "label": "Row", "slot": "auxiliary", "default": "12"},
    {"key": "doors", "label": "Doors", "slot": "auxiliary", "time_style": "short"},
]


def _issue_preview(stack: Stack, barcode_format: str) -> dict[str, Any]:
    design = {
        **TEMPLATE_BODY["design"],
        "colors": {"background": "#1B2A4A", "foreground": "#FFFFFF", "label": "#F6C177"},
        "images": {"logo": {"x1": _logo(1), "x3": _logo(3)}},
        "fields": PREVIEW_FIELDS,
        "barcode": {"format": barcode_format, "message": "{serial_number}", "alt_text": "Gate B"},
    }
    with stack.client(headers=stack.new_account().headers()) as client:
        template = create_template(client, TEMPLATE_BODY, design=design)
        response = client.post(
            "/v1/passes",
            json={
                "template_id": template["id"],
                "holder_name": "Ada Lovelace",
                "field_values": {"seat": "C3", "doors": "2031-10-08T19:00:00+02:00"},
            },
        )
    assert response.status_code == 200, response.text
    issued: dict[str, Any] = response.json()
    return issued


def _check_preview(page: Page, barcode_format: str) -> None:
    """What acceptance 8 asks of the page, read from the DOM Chromium rendered."""
    card = page.locator(".pass")
    for slot, keys in (
        ("header", ["date"]),
        ("primary", ["seat"]),
        ("secondary", ["starts", "gate"]),
        ("auxiliary", ["row", "doors"]),
    ):
        row = card.locator(f".pass-{slot}")
        assert row.is_visible(), slot
        assert row.locator("[data-field]").evaluate_all("els => els.map(e => e.dataset.field)") == (
            keys
        )
    assert card.locator('[data-field="date"] dd').inner_text() == "8 Oct 2031"
    assert card.locator('[data-field="starts"] dd').inner_text() == "Wed 8 Oct 2031, 20:00"
    assert card.locator('[data-field="doors"] dd').inner_text() == "19:00"
    assert "2031-10-08T" not in page.locator("body").inner_text()
    badge = card.locator("[data-test-badge]")
    assert badge.is_visible()
    assert badge.inner_text().strip().upper() == "TEST"
    barcode = card.locator(f'.pass-barcode[data-barcode-format="{barcode_format}"] svg')
    assert barcode.is_visible()
    box = barcode.bounding_box()
    assert box is not None
    assert box["width"] >= 100
    assert card.locator(".pass-barcode figcaption").inner_text() == "Gate B"


def test_desktop_preview_shows_every_slot_dates_a_pdf417_and_the_test_badge(
    stack: Stack, browser: Browser
) -> None:
    issued = _issue_preview(stack, "pdf417")
    context = browser.new_context(
        viewport={"width": 1280, "height": 900}, device_scale_factor=2, user_agent=DESKTOP
    )
    try:
        page, problems = _open(context, issued["url"], stack)
        _check_preview(page, "pdf417")
        handoff = page.locator(".handoff")
        assert handoff.locator(".handoff-title").inner_text() == (
            "Scan with your phone to add the pass"
        )
        assert "not your ticket" in handoff.locator("figcaption").inner_text()
        # Both codes as drawn: the handoff QR opens the page, the PDF417 is the pass's own.
        wanted = {
            (str(zxingcpp.BarcodeFormat.QRCode), issued["url"]),
            (str(zxingcpp.BarcodeFormat.PDF417), issued["serial_number"]),
        }
        assert _drawn_codes(page, "landing-preview-desktop.png", wanted) == wanted
        assert problems == []
    finally:
        context.close()


def test_iphone_preview_shows_an_aztec_code_that_scans(
    stack: Stack, browser: Browser, iphone: dict[str, Any]
) -> None:
    issued = _issue_preview(stack, "aztec")
    context = browser.new_context(**iphone)
    try:
        page, problems = _open(context, issued["url"], stack)
        _check_preview(page, "aztec")
        assert page.locator(".handoff").count() == 0
        assert page.get_by_role("note").inner_text().startswith("Test pass")
        wanted = {(str(zxingcpp.BarcodeFormat.Aztec), issued["serial_number"])}
        assert _drawn_codes(page, "landing-preview-iphone.png", wanted) == wanted
        assert problems == []
    finally:
        context.close()


def test_an_expired_link_page_carries_the_templates_branding(
    stack: Stack, browser: Browser
) -> None:
    # The api in this process, on a clock the test moves: the link expires without waiting.
    with running_api(stack, ManualClock()) as api:
        account = stack.new_account()
        client = httpx2.Client(base_url=api.base_url, headers=account.headers(), timeout=30)
        design = {
            **TEMPLATE_BODY["design"],
            "colors": {"background": "#1B2A4A", "foreground": "#FFFFFF", "label": "#F6C177"},
            "images": {"logo": {"x1": _logo(1), "x3": _logo(3)}},
        }
        template = create_template(client, TEMPLATE_BODY, design=design)
        issued = ok(
            client.post(
                "/v1/passes", json={"template_id": template["id"], "holder_name": "Ada Lovelace"}
            )
        )
        link = ok(client.post(f"/v1/passes/{issued['id']}/download-links", json={"expires_in": 60}))
        api.clock.advance(61)
        context = browser.new_context(viewport={"width": 412, "height": 915}, user_agent=ANDROID)
        try:
            page = context.new_page()
            response = page.goto(link["url"])
            assert response is not None
            assert response.status == 410
            brand = page.locator("[data-brand]")
            assert brand.locator(".brand-name").inner_text() == "Acme Live"
            background = brand.evaluate("el => getComputedStyle(el).backgroundColor")
            assert background == "rgb(27, 42, 74)"
            assert brand.locator(".brand-logo").evaluate("img => img.naturalWidth") == 150
            assert page.get_by_role("heading", name="This link has expired").is_visible()
            assert "Ada Lovelace" not in page.locator("body").inner_text()
            _screenshot(page, "landing-expired-branded.png")
        finally:
            context.close()
            client.close()
