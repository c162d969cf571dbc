"""services/api/pages/view.py: what the landing page shows of a pass."""

import base64

from services.api.pages.view import build_view, pass_css, site_path
from tests.issuer.pkpass_samples import png
from tests.support.records import DESIGN, pass_record, template_record


def test_main_fields_take_the_pass_value_else_the_default() -> None:
    view = build_view(pass_record(), template_record())
    assert [(f.key, f.label, f.value) for f in view.header_fields] == [("venue", "Venue", "Hall A")]
    assert [(f.key, f.value) for f in view.primary_fields] == [("seat", "C3")]
    # "gate" has neither a value nor a default: nothing to show.
    assert view.secondary_fields == ()


def test_only_front_fields_are_shown() -> None:
    record = pass_record(field_values={"gate": "4", "row": "7", "terms": "secret"})
    view = build_view(record, template_record())
    shown = {f.key for f in (*view.header_fields, *view.primary_fields, *view.secondary_fields)}
    assert shown == {"venue", "seat", "gate"}


def test_design_and_pass_facts() -> None:
    view = build_view(pass_record(voided=True), template_record())
    assert (view.organization, view.description, view.title) == (
        "Acme Live",
        "Concert ticket",
        "Acme",
    )
    assert (view.background, view.foreground, view.label_color) == ("#12233A", "#FFFFFF", "#9FC3FF")
    assert view.holder_name == "Ada Lovelace"
    assert view.voided
    assert view.has_google
    assert view.logo_url is None


def test_title_falls_back_to_the_organization_and_google_may_be_missing() -> None:
    template = template_record(design={**DESIGN, "logo_text": None})
    view = build_view(pass_record(google_save_url=None, holder_name=""), template)
    assert view.title == "Acme Live"
    assert not view.has_google
    assert view.holder_name is None


def test_logo_is_served_same_origin_under_the_site_path() -> None:
    logo = base64.b64encode(png(100, 30)).decode()
    template = template_record(design={**DESIGN, "images": {"logo": logo}})
    assert build_view(pass_record(), template).logo_url == "/t/tmpl_test/logo.png"
    prefixed = build_view(pass_record(), template, path_prefix=site_path("https://x.io/wallet/"))
    assert prefixed.logo_url == "/wallet/t/tmpl_test/logo.png"
    assert site_path("https://x.io") == ""


def test_pass_css_carries_the_colors_and_nothing_else() -> None:
    view = build_view(pass_record(), template_record())
    assert pass_css(view) == ":root{--pass-bg:#12233A;--pass-fg:#FFFFFF;--pass-label:#9FC3FF}"
