"""HTML of the pages, from the Jinja2 templates beside this module.

The environment is made on first use (nothing at import time) with autoescaping on for every
template, so holder names and field values can never become markup.
"""

import functools
import hashlib
from collections.abc import Callable
from importlib import resources

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from services.api.pages.brand import Brand, brand_css
from services.api.pages.bundle_view import BundleView, bundle_css
from services.api.pages.platform import Platform
from services.api.pages.scanner import ScannerUrls
from services.api.pages.view import PassView, pass_css

STYLESHEET = "pages.css"


@functools.cache
def _environment() -> Environment:
    return Environment(
        loader=PackageLoader("services.api.pages", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


@functools.cache
def stylesheet() -> bytes:
    return resources.files("services.api.pages").joinpath("static", STYLESHEET).read_bytes()


def stylesheet_url(path_prefix: str = "") -> str:
    """Versioned by content, so browsers may cache it for long and never keep a stale one."""
    version = hashlib.sha256(stylesheet()).hexdigest()[:12]
    return f"{path_prefix}/static/{STYLESHEET}?v={version}"


def render_landing(
    view: PassView,
    *,
    platform: Platform,
    page_url: str,
    qr: str | None,
    path_prefix: str = "",
) -> str:
    """The landing page. `page_url` is the family's base URL: the buttons and the QR use it."""
    return _render(
        "landing.html",
        path_prefix,
        view=view,
        platform=platform,
        page_url=page_url,
        apple_url=f"{page_url}/pass.pkpass",
        google_url=f"{page_url}/google",
        # Both are made here from checked values (qr.py, view.pass_css), not from user text.
        qr=Markup(qr) if qr is not None else None,  # noqa: S704  # segno's SVG of a checked URL
        pass_css=Markup(pass_css(view)),  # noqa: S704  # only validated colours go in
    )


def render_bundle(
    bundle: BundleView, *, platform: Platform, qr: str | None, path_prefix: str = ""
) -> str:
    """A bundle's landing page (docs/pages.md#pass-bundles)."""
    return _render(
        "bundle.html",
        path_prefix,
        bundle=bundle,
        platform=platform,
        qr=Markup(qr) if qr is not None else None,  # noqa: S704  # segno's SVG of a checked URL
        pass_css=Markup(bundle_css(bundle)),  # noqa: S704  # only validated colours go in
    )


MessageRenderer = Callable[[str, Brand | None], str]


def render_not_found(path_prefix: str = "", brand: Brand | None = None) -> str:
    return _render_message("not_found.html", path_prefix, brand)


def render_expired(path_prefix: str = "", brand: Brand | None = None) -> str:
    return _render_message("expired.html", path_prefix, brand)


def _render_message(name: str, path_prefix: str, brand: Brand | None) -> str:
    """A page without pass data; with `brand`, in the template's name, logo and colors."""
    css = Markup(brand_css(brand)) if brand is not None else None  # noqa: S704  # checked colours
    return _render(name, path_prefix, brand=brand, brand_css=css)


def render_scanner(urls: ScannerUrls) -> str:
    """The staff scanner page (docs/redemption.md): static HTML, its script does the rest."""
    return _environment().get_template("scan.html").render(urls=urls)


def _render(name: str, path_prefix: str, **context: object) -> str:
    template = _environment().get_template(name)
    return template.render(stylesheet_url=stylesheet_url(path_prefix), **context)
