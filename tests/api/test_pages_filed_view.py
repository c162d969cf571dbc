"""services/api/pages/filed_view.py: the preview read back from the pass file while a design
change has not reached the pass yet."""

import io
import json
import zipfile
from typing import Any

from services.api.pages.filed_view import build_filed_view, is_behind, pass_json_of
from services.api.pages.view import build_view
from tests.support.records import DESIGN, pass_record, template_record

# What the issuer wrote for the pass at design_version 1 (services/issuer/passjson.py).
PASS_JSON: dict[str, Any] = {
    "organizationName": "Acme Live (old)",
    "description": "Concert ticket (old)",
    "logoText": "Old Acme",
    "foregroundColor": "rgb(255, 255, 255)",
    "backgroundColor": "rgb(200, 16, 46)",
    "labelColor": "rgb(255, 220, 0)",
    "eventTicket": {
        "headerFields": [{"key": "venue", "label": "Hall", "value": "Hall B"}],
        "primaryFields": [{"key": "seat", "label": "Seat", "value": "C3"}],
        "secondaryFields": [
            {
                "key": "starts",
                "label": "Starts",
                "value": "2031-10-08T20:00:00+02:00",
                "dateStyle": "PKDateStyleMedium",
                "timeStyle": "PKDateStyleShort",
            },
            {"key": "holder_name", "label": "Name", "value": "Ada Lovelace"},
        ],
        "auxiliaryFields": [{"key": "row", "label": "Row", "value": 12}],
        "backFields": [{"key": "terms", "label": "Terms", "value": "secret"}],
    },
    "barcodes": [
        {"format": "PKBarcodeFormatAztec", "message": "serial-1", "messageEncoding": "utf-8"}
    ],
}


def _pkpass(document: object) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("pass.json", json.dumps(document))
        archive.writestr("manifest.json", "{}")
    return buffer.getvalue()


def test_a_pass_is_behind_while_its_design_version_is_older() -> None:
    template = template_record(design_version=2)
    assert is_behind(pass_record(design_version=1), template)
    assert not is_behind(pass_record(design_version=2), template)


def test_the_preview_is_what_the_file_shows() -> None:
    record = pass_record(design_version=1)
    template = template_record(design_version=2)
    view = build_filed_view(record, template, PASS_JSON)
    current = build_view(record, template)
    assert (view.organization, view.description, view.title) == (
        "Acme Live (old)",
        "Concert ticket (old)",
        "Old Acme",
    )
    assert (view.background, view.foreground, view.label_color) == ("#C8102E", "#FFFFFF", "#FFDC00")
    assert [(f.label, f.value) for f in view.header_fields] == [("Hall", "Hall B")]
    # Dates formatted as on the template's own preview; the holder's name has its own line.
    assert [(f.key, f.value) for f in view.secondary_fields] == [
        ("starts", "Wed 8 Oct 2031, 20:00")
    ]
    assert [(f.key, f.value) for f in view.auxiliary_fields] == [("row", "12")]
    assert view.barcode is not None
    assert (view.barcode.format, view.barcode.message) == ("aztec", "serial-1")
    # What the file does not say comes from the pass and template as they are now.
    assert (view.holder_name, view.test_mode, view.has_google) == (
        current.holder_name,
        True,
        current.has_google,
    )


def test_pass_json_is_read_from_the_pkpass_and_junk_gives_none() -> None:
    assert pass_json_of(_pkpass(PASS_JSON)) == PASS_JSON
    assert pass_json_of(b"not a zip") is None
    assert pass_json_of(_pkpass([1, 2])) is None


def test_odd_colors_and_missing_slots_fall_back() -> None:
    document = {"backgroundColor": "red", "generic": {"primaryFields": "x"}}
    view = build_filed_view(pass_record(), template_record(design=DESIGN), document)
    assert (view.background, view.organization) == ("#FFFFFF", "Acme Live")
    assert view.primary_fields == ()
    assert view.barcode is None
