"""Acceptance: pass.json validates against a JSON Schema of Apple's pass.json, which is strict.

The schema (tests/fixtures/pass.schema.json) is written from Apple's Wallet Passes reference,
not from our renderer; the second half of this module shows it refuses broken documents.
"""

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from services.issuer.content import APPLE_STYLES
from services.issuer.passjson import render_pass_json
from shared.apple_identity import SigningIdentity, ensure_dev_identity
from shared.design import Design
from tests.issuer.pkpass_samples import RICH_VARIANTS, content, sample

SCHEMA_PATH = Path(__file__).resolve().parents[1] / "fixtures" / "pass.schema.json"
Document = dict[str, Any]


@pytest.fixture(scope="module")
def identity(tmp_path_factory: pytest.TempPathFactory) -> SigningIdentity:
    return ensure_dev_identity(tmp_path_factory.mktemp("signing"))


@pytest.fixture(scope="module")
def validator() -> jsonschema.protocols.Validator:
    schema = json.loads(SCHEMA_PATH.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.fixture(scope="module")
def valid_pass(identity: SigningIdentity) -> Document:
    return render_pass_json(sample("boardingPass", "rich"), identity)


def _problems(validator: jsonschema.protocols.Validator, document: Document) -> list[str]:
    return [error.message for error in validator.iter_errors(document)]


@pytest.mark.parametrize(
    ("style", "variant"), [*((style, "minimal") for style in APPLE_STYLES), *RICH_VARIANTS]
)
def test_every_style_validates(
    style: str, variant: str, identity: SigningIdentity, validator: jsonschema.protocols.Validator
) -> None:
    assert _problems(validator, render_pass_json(sample(style, variant), identity)) == []


@pytest.mark.parametrize("fmt", ["qr", "pdf417", "aztec", "code128"])
def test_each_barcode_format_validates(
    fmt: str, identity: SigningIdentity, validator: jsonschema.protocols.Validator
) -> None:
    design = Design.model_validate(
        {"organization_name": "T", "description": "D", "barcode": {"format": fmt}}
    )
    document = render_pass_json(content(design, voided=True), identity)

    assert _problems(validator, document) == []


def test_unformattable_field_values_still_validate(
    identity: SigningIdentity, validator: jsonschema.protocols.Validator
) -> None:
    # The renderer drops date/number styles from values Wallet could not format.
    passed = sample("generic", "rich")
    broken = content(
        passed.design, field_values={"starts": "tonight", "share": "a quarter", "price": "free"}
    )

    assert _problems(validator, render_pass_json(broken, identity)) == []


def _without(key: str) -> Callable[[Document], None]:
    return lambda document: document.pop(key)


def _set(key: str, value: Any) -> Callable[[Document], None]:
    return lambda document: document.__setitem__(key, value)


def _in_style(change: Callable[[dict[str, Any]], None]) -> Callable[[Document], None]:
    return lambda document: change(document["boardingPass"])


def _first_field(slot: str, index: int = 0, **changes: Any) -> Callable[[Document], None]:
    return _in_style(lambda style: style[slot][index].update(changes))


def _grouped_coupon(document: Document) -> None:
    document["coupon"] = {}
    del document["boardingPass"]
    document["groupingIdentifier"] = "g"


BROKEN: dict[str, Callable[[Document], None]] = {
    "no serialNumber": _without("serialNumber"),
    "no teamIdentifier": _without("teamIdentifier"),
    "formatVersion 2": _set("formatVersion", 2),
    "hex color": _set("backgroundColor", "#FFFFFF"),
    "rgb out of range": _set("labelColor", "rgb(256, 0, 0)"),
    "unknown key": _set("backgroundColour", "rgb(0, 0, 0)"),
    "no style key": _without("boardingPass"),
    "two style keys": _set("generic", {}),
    "no transitType": _in_style(lambda style: style.pop("transitType")),
    "bad transitType": _in_style(
        lambda style: style.__setitem__("transitType", "PKTransitTypeCar")
    ),
    "webServiceURL without token": _without("authenticationToken"),
    "short token": _set("authenticationToken", "fifteen-chars!!"),
    "unknown barcode format": _set(
        "barcodes", [{"format": "PKBarcodeFormatEAN13", "message": "1", "messageEncoding": "utf-8"}]
    ),
    "barcode without encoding": _set("barcodes", [{"format": "PKBarcodeFormatQR", "message": "1"}]),
    "legacy Code 128": _set(
        "barcode", {"format": "PKBarcodeFormatCode128", "message": "1", "messageEncoding": "utf-8"}
    ),
    "date without time zone": _set("expirationDate", "2031-12-31T23:59:00"),
    "date only": _set("relevantDate", "2031-12-31"),
    "eleven locations": _set("locations", [{"latitude": 0, "longitude": 0}] * 11),
    "latitude 91": _set("locations", [{"latitude": 91, "longitude": 0}]),
    "field without value": _in_style(lambda style: style["primaryFields"][0].pop("value")),
    "field with unknown key": _first_field("primaryFields", colour="red"),
    "numberStyle on text": _first_field("auxiliaryFields", 1, value="quarter"),
    "currency on text": _first_field("secondaryFields", currencyCode="EUR"),
    "dateStyle on text": _first_field("headerFields", value="tonight"),
    "textAlignment on a primary field": _first_field(
        "primaryFields", textAlignment="PKTextAlignmentLeft"
    ),
    "bad textAlignment": _first_field("auxiliaryFields", textAlignment="middle"),
    "changeMessage without %@": _first_field("secondaryFields", changeMessage="Seat changed"),
    "data detectors on the front": _first_field(
        "headerFields", dataDetectorTypes=["PKDataDetectorTypeLink"]
    ),
    "isRelative without a date style": _first_field("secondaryFields", isRelative=True),
    "groupingIdentifier on a coupon": _grouped_coupon,
}


@pytest.mark.parametrize("change", BROKEN.values(), ids=BROKEN.keys())
def test_broken_documents_are_refused(
    change: Callable[[Document], None],
    valid_pass: Document,
    validator: jsonschema.protocols.Validator,
) -> None:
    document = copy.deepcopy(valid_pass)
    assert _problems(validator, document) == []

    change(document)

    assert _problems(validator, document) != []
