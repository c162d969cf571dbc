"""services/api/pages/view.py: what the landing page shows of a pass."""

import base64

from services.api.pages.view import build_view, pass_css, site_path
from shared.design import Design
from shared.design_images import image_version
from tests.issuer.pkpass_samples import png
from tests.support.records import DESIGN, pass_record, template_record


def test_main_fields_take_the_pass_value_else_the_default() -> None:
    view = build_view(pass_record(), template_record())
    assert [(f.key, f.label, f.value) for f in view.header_fields] == [("venue", "Venue", "Hall A")]
    assert [(f.key, f.value) for f in view.primary_fields] == [("seat", "C3")]
    # "gate" has neither a value nor a default: nothing to show.
    assert view.secondary_fields == ()


def test_only_front_fields_are_shown_auxiliary_included() -> None:
    record = pass_record(field_values={"gate": "4", "row": "7", "terms": "secret"})
    view = build_view(record, template_record())
    front = (
        *view.header_fields,
        *view.primary_fields,
        *view.secondary_fields,
        *view.auxiliary_fields,
    )
    assert {f.key for f in front} == {"venue", "seat", "gate", "row"}
    assert [(f.key, f.label, f.value) for f in view.auxiliary_fields] == [("row", "Row", "7")]


def test_date_fields_are_formatted_per_their_styles() -> None:
    fields = [
        *DESIGN["fields"],
        {"key": "doors", "label": "Doors", "slot": "auxiliary", "time_style": "short"},
        {
            "key": "starts",
            "label": "Starts",
            "slot": "secondary",
            "date_style": "medium",
            "time_style": "short",
            "default": "2031-10-08T20:00:00+02:00",
        },
    ]
    template = template_record(design={**DESIGN, "fields": fields})
    view = build_view(pass_record(field_values={"doors": "2031-10-08T19:00:00+02:00"}), template)
    assert [(f.key, f.value) for f in view.secondary_fields] == [
        ("starts", "Wed 8 Oct 2031, 20:00")
    ]
    assert ("doors", "19:00") in [(f.key, f.value) for f in view.auxiliary_fields]


def test_test_mode_and_the_first_barcode_with_the_passs_own_message() -> None:
    design = {**DESIGN, "barcodes": [{"format": "pdf417", "alt_text": "A-1"}, {"format": "qr"}]}
    view = build_view(pass_record(barcode_message="serial-1"), template_record(design=design))
    assert view.test_mode
    assert view.barcode is not None
    assert (view.barcode.format, view.barcode.message, view.barcode.alt_text) == (
        "pdf417",
        "serial-1",
        "A-1",
    )
    live = build_view(pass_record(mode="live"), template_record(mode="live", design=design))
    # No rendered message (the issuer left the barcode out): nothing to preview.
    assert (live.test_mode, live.barcode) == (False, None)
    assert build_view(pass_record(barcode_message="x"), template_record()).barcode is None


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
    stored = Design.from_stored(template.design).images.logo  # as saved (cleaned)
    assert stored is not None
    versioned = f"/t/tmpl_test/logo.png?v={image_version(stored)}"  # a new logo, a new URL
    assert build_view(pass_record(), template).logo_url == versioned
    prefixed = build_view(pass_record(), template, path_prefix=site_path("https://x.io/wallet/"))
    assert prefixed.logo_url == f"/wallet{versioned}"
    assert site_path("https://x.io") == ""
    # An archived template's passes remain valid, with their logo.
    archived = template.model_copy(update={"archived": True})
    assert build_view(pass_record(), archived).logo_url == versioned


def test_pass_css_carries_the_colors_and_nothing_else() -> None:
    view = build_view(pass_record(), template_record())
    assert pass_css(view) == ":root{--pass-bg:#12233A;--pass-fg:#FFFFFF;--pass-label:#9FC3FF}"
