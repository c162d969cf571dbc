"""A template's branding on the pages that show no pass: the expired-link page and a 404 for a
pass that is known (docs/pages.md). Its name, logo and colors only; never a pass's data.
"""

from dataclasses import dataclass

from services.api.pages.view import logo_url, safe_color
from shared.design import Design
from shared.models import TemplateRecord


@dataclass(frozen=True)
class Brand:
    organization: str
    logo_url: str | None
    background: str
    foreground: str


def build_brand(template: TemplateRecord, *, path_prefix: str = "") -> Brand:
    design = Design.from_stored(template.design)
    return Brand(
        organization=design.organization_name,
        logo_url=logo_url(template, design, path_prefix),
        background=design.colors.background,
        foreground=design.colors.foreground,
    )


def brand_css(brand: Brand) -> str:
    """The page's one inline <style> (its hash goes into the CSP, as view.pass_css's does)."""
    background = safe_color(brand.background, "#FFFFFF")
    foreground = safe_color(brand.foreground, "#000000")
    return f":root{{--brand-bg:{background};--brand-fg:{foreground}}}"
