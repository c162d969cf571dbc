"""Debian's Chromium driven by Playwright, for the page tests (landing page, API docs, scanner):
where it is, how it is started, and the marks that skip a test without it."""

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Playwright, expect, sync_playwright

CHROMIUM = Path("/usr/bin/chromium")
# Screenshots for a person to look at.
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
# Page expectations wait up to 15 s, not Playwright's 5: what the pages run (Swagger UI
# rendering every operation, ReDoc's search index, the scanner's WebAssembly decoder) takes
# seconds on a loaded 2-CPU machine beside the rest of the suite. One that holds returns at once.
expect.set_options(timeout=15_000)
BROWSER_MARKS = [
    pytest.mark.e2e,
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium (.ci/run)"
    ),
]


@contextmanager
def running_playwright() -> Iterator[Playwright]:
    with sync_playwright() as running:
        yield running


@contextmanager
def chromium(playwright: Playwright, extra_args: list[str] | None = None) -> Iterator[Browser]:
    launched = playwright.chromium.launch(
        executable_path=str(CHROMIUM), args=CHROMIUM_ARGS + (extra_args or [])
    )
    try:
        yield launched
    finally:
        launched.close()
