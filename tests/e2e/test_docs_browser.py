"""/docs (Swagger UI) and /redoc (ReDoc) in a real headless Chromium (Debian's), driven by
Playwright, with every request to any origin but the stack's refused: both render the reference
from what Tessera serves, under their strict CSP, with no policy violation and no request that
left the stack (issue 16, section 5; acceptance 6). Screenshots go to test-artifacts/
(docs-*.png) for a person to look at.
"""

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, Route
from playwright.sync_api import expect as page_expect

from tests.support.browser import ARTIFACTS, BROWSER_MARKS, chromium, running_playwright
from tests.support.stack import Stack

# Every CSP violation of the page, whatever the console says about it.
RECORD_VIOLATIONS = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", (event) => {
  window.__violations.push(`${event.violatedDirective} ${event.blockedURI} ${event.sourceFile}`);
});
"""

pytestmark = BROWSER_MARKS


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with running_playwright() as playwright, chromium(playwright) as launched:
        yield launched


@dataclass
class Visit:
    """A page of the stack, opened with every other origin cut off."""

    page: Page
    headers: dict[str, str]
    requested: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def violations(self) -> list[str]:
        found: list[str] = self.page.evaluate("window.__violations")
        return found


def _open(browser: Browser, stack: Stack, path: str) -> Iterator[Visit]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.add_init_script(RECORD_VIOLATIONS)
    origin = stack.base_url.rstrip("/")
    requested: list[str] = []
    refused: list[str] = []
    errors: list[str] = []

    def only_the_stack(route: Route) -> None:
        url = route.request.url
        requested.append(url)
        if url == origin or url.startswith(origin + "/"):
            route.continue_()
        else:
            refused.append(url)
            route.abort()

    page.route("**/*", only_the_stack)
    page.on(
        "console", lambda message: errors.append(message.text) if message.type == "error" else None
    )
    page.on("pageerror", lambda error: errors.append(f"page error: {error}"))
    try:
        response = page.goto(f"{origin}{path}")
        assert response is not None
        assert response.status == 200
        yield Visit(page, response.headers, requested, refused, errors)
    finally:
        context.close()


@pytest.fixture
def swagger(browser: Browser, stack: Stack) -> Iterator[Visit]:
    yield from _open(browser, stack, "/docs")


@pytest.fixture
def redoc(browser: Browser, stack: Stack) -> Iterator[Visit]:
    yield from _open(browser, stack, "/redoc")


def _screenshot(page: Page, name: str, **options: Any) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / name
    page.screenshot(path=str(path), **options)
    return path


def _nothing_left_the_stack(visit: Visit, stack: Stack) -> None:
    assert not visit.refused, f"requests to other origins: {visit.refused}"
    origin = stack.base_url.rstrip("/")
    assert all(url.startswith(origin) for url in visit.requested), visit.requested
    assert not visit.violations(), visit.violations()
    assert not visit.errors, visit.errors


def _strict(policy: str) -> dict[str, list[str]]:
    directives = {}
    for directive in policy.split(";"):
        name, *values = directive.split()
        directives[name] = values
    assert directives["default-src"] == ["'none'"]
    assert directives["script-src"] == ["'self'"]
    assert directives["connect-src"] == ["'self'"]
    assert directives["frame-ancestors"] == ["'none'"]
    assert "'unsafe-inline'" not in policy
    assert "'unsafe-eval'" not in policy
    return directives


def test_swagger_ui_renders_the_operations_from_tessera_alone(swagger: Visit, stack: Stack) -> None:
    page = swagger.page
    assert _strict(swagger.headers["content-security-policy"])["style-src"] == ["'self'"]
    page_expect(page.locator(".opblock-tag", has_text="Variant A")).to_be_visible()
    summary = page.locator(".opblock-summary-description", has_text="Issue a pass").first
    page_expect(summary).to_be_visible()
    assert page.locator(".opblock").count() >= 40
    # An operation opens with its description and example, as the document gives them.
    page.locator(".opblock-summary", has_text="Issue a pass").first.click()
    page_expect(page.get_by_text("Ada's ticket, as in the README").first).to_be_attached()
    _screenshot(page, "docs-swagger.png", full_page=True)
    _nothing_left_the_stack(swagger, stack)
    loaded = [url for url in swagger.requested if "/static/docs/" in url]
    assert {url.split("?")[0].rsplit("/", 1)[1] for url in loaded} == {
        "swagger-ui.css",
        "swagger-ui-bundle.js",
        "swagger-init.js",
    }


def test_redoc_renders_the_reference_from_tessera_alone(redoc: Visit, stack: Stack) -> None:
    page = redoc.page
    directives = _strict(redoc.headers["content-security-policy"])
    assert directives["style-src"][0] == "'self'"
    assert directives["style-src"][1].startswith("'nonce-")
    heading = page.locator("h2", has_text="Issue a pass").first
    page_expect(heading).to_be_visible(timeout=20_000)
    page_expect(page.get_by_role("menuitem", name="Variant A").first).to_be_attached()
    # ReDoc's styles applied (its <style> elements carry the nonce): the menu is a side bar.
    menu = page.locator(".menu-content").first
    page_expect(menu).to_be_visible()
    box = menu.bounding_box()
    assert box is not None
    assert box["width"] < 400, box
    # Its search runs in a worker made from a blob (worker-src blob:), over an index the worker
    # builds from the whole reference first: seconds on a loaded machine.
    page.get_by_placeholder("Search...").fill("redirect")
    results = page.locator("[data-role='search:results'] [role=menuitem]")
    page_expect(results.first).to_be_visible(timeout=30_000)
    page_expect(results.filter(has_text="Save to Google Wallet (redirect)")).to_have_count(1)
    _screenshot(page, "docs-redoc.png")
    _nothing_left_the_stack(redoc, stack)
