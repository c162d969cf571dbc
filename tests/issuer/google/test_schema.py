"""Every class and object we produce validates against Google's walletobjects v1 discovery.

The schemas come from tests/fixtures/walletobjects.v1.json (Google's own discovery document as
shipped by google-api-python-client), not from our code; see walletschema.py for the mapping.
"""

from datetime import UTC, datetime
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from services.issuer.google.identity import GoogleIdentity
from services.issuer.google.objects import CLASS_FIELDS_OF_DESIGN, vertical_for
from services.issuer.google.savelink import object_reference
from tests.issuer.google import walletschema
from tests.issuer.google.samples import (
    CALLBACK_URL,
    LOGO_URL,
    TEMPLATE_TYPES,
    make_design,
    sample_class,
    sample_object,
)

VARIANTS: dict[str, dict[str, Any]] = {
    "full": {},
    "voided": {"voided": True},
    "logo": {"logo_url": LOGO_URL},
    "anonymous": {"holder_name": None, "holder_email": None, "field_values": {}},
}


def _schema_name(template_type: str, kind: str) -> str:
    vertical = vertical_for(template_type)
    return vertical[0].upper() + vertical[1:] + kind


def test_discovery_document_is_googles() -> None:
    document = walletschema.discovery()
    assert document["name"] == "walletobjects"
    assert document["version"] == "v1"
    assert {"EventTicketObject", "LoyaltyClass", "OfferObject", "GenericClass"} <= set(
        document["schemas"]
    )
    # The converted document is itself valid JSON Schema (2020-12 metaschema).
    Draft202012Validator.check_schema(walletschema.document())


@pytest.mark.parametrize("template_type", TEMPLATE_TYPES)
@pytest.mark.parametrize("logo", [None, LOGO_URL])
def test_classes_validate(identity: GoogleIdentity, template_type: str, logo: str | None) -> None:
    resource = sample_class(identity, template_type, logo_url=logo)
    assert walletschema.errors(_schema_name(template_type, "Class"), resource) == []


@pytest.mark.parametrize("template_type", TEMPLATE_TYPES)
def test_classes_with_callbacks_validate(identity: GoogleIdentity, template_type: str) -> None:
    resource = sample_class(identity, template_type, callback_url=CALLBACK_URL)
    assert walletschema.errors(_schema_name(template_type, "Class"), resource) == []


@pytest.mark.parametrize("template_type", TEMPLATE_TYPES)
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_objects_validate(identity: GoogleIdentity, template_type: str, variant: str) -> None:
    resource = sample_object(identity, template_type, **VARIANTS[variant])
    assert walletschema.errors(_schema_name(template_type, "Object"), resource) == []


@pytest.mark.parametrize("barcode_format", ["qr", "pdf417", "aztec", "code128"])
def test_every_barcode_format_validates(identity: GoogleIdentity, barcode_format: str) -> None:
    design = make_design(barcode={"format": barcode_format, "message": "{serial_number}"})
    resource = sample_object(identity, "generic", design)
    assert walletschema.errors("GenericObject", resource) == []


@pytest.mark.parametrize("template_type", TEMPLATE_TYPES)
def test_translations_and_validity_validate(identity: GoogleIdentity, template_type: str) -> None:
    strings = {"Seat": "Place", "Gate": "Porte", "Summer Festival 2026": "Festival", "12A": "12 A"}
    design = make_design(localizations={"fr": strings, "de": {"Seat": "Platz"}})
    expires = datetime(2031, 12, 31, 23, 59, tzinfo=UTC)
    resource = sample_object(identity, template_type, design, expiration_date=expires)
    assert walletschema.errors(_schema_name(template_type, "Object"), resource) == []
    resource_class = sample_class(identity, template_type, design)
    assert walletschema.errors(_schema_name(template_type, "Class"), resource_class) == []


def test_minimal_design_validates(identity: GoogleIdentity) -> None:
    design = make_design(fields=[], barcode=None, logo_text=None, colors={})
    for template_type in TEMPLATE_TYPES:
        resource = sample_object(identity, template_type, design)
        assert walletschema.errors(_schema_name(template_type, "Object"), resource) == []
        resource = sample_class(identity, template_type, design)
        assert walletschema.errors(_schema_name(template_type, "Class"), resource) == []


@pytest.mark.parametrize("template_type", TEMPLATE_TYPES)
def test_jwt_payload_validates_as_resources(identity: GoogleIdentity, template_type: str) -> None:
    """The payload keys (`eventTicketObjects`, ...) are those of Google's `Resources` schema."""
    vertical = vertical_for(template_type)
    fat = {
        f"{vertical}Classes": [sample_class(identity, template_type)],
        f"{vertical}Objects": [sample_object(identity, template_type)],
    }
    skinny = {f"{vertical}Objects": [object_reference(sample_object(identity, template_type))]}
    assert walletschema.errors("Resources", fat) == []
    assert walletschema.errors("Resources", skinny, with_required=False) == []


# The validator itself: it must catch what Google would refuse, or the tests above prove nothing.


def test_misspelled_key_fails(identity: GoogleIdentity) -> None:
    resource = {**sample_object(identity, "event"), "ticketHolder": "Ada"}
    assert any(
        "ticketHolder" in error for error in walletschema.errors("EventTicketObject", resource)
    )


def test_misspelled_nested_key_fails(identity: GoogleIdentity) -> None:
    resource = sample_class(identity, "event")
    resource["eventName"] = {"defaultValue": {"language": "en", "text": "x"}}
    assert walletschema.errors("EventTicketClass", resource) != []


def test_wrong_enum_and_type_fail(identity: GoogleIdentity) -> None:
    resource = {**sample_object(identity, "coupon"), "state": "VOIDED"}
    assert walletschema.errors("OfferObject", resource) != []
    resource = {**sample_object(identity, "coupon"), "barcode": {"type": "QR", "value": "x"}}
    assert walletschema.errors("OfferObject", resource) != []
    resource = {**sample_class(identity, "coupon"), "title": {"defaultValue": "x"}}
    assert walletschema.errors("OfferClass", resource) != []


@pytest.mark.parametrize(
    ("schema", "template_type", "kind", "key"),
    [
        ("EventTicketClass", "event", "Class", "eventName"),
        ("LoyaltyClass", "loyalty", "Class", "programLogo"),
        ("OfferClass", "coupon", "Class", "redemptionChannel"),
        ("GenericObject", "generic", "Object", "header"),
        ("LoyaltyObject", "membership", "Object", "state"),
    ],
)
def test_missing_required_field_fails(
    identity: GoogleIdentity, schema: str, template_type: str, kind: str, key: str
) -> None:
    builder = sample_class if kind == "Class" else sample_object
    resource = builder(identity, template_type)
    del resource[key]
    assert any(key in error for error in walletschema.errors(schema, resource))


def test_int64_fields_are_decimal_strings() -> None:
    schema = walletschema.definitions()["Money"]["properties"]["micros"]
    assert schema["type"] == "string"
    assert walletschema.errors("Money", {"micros": "1500000", "currencyCode": "EUR"}) == []
    assert walletschema.errors("Money", {"micros": "1.5"}) != []


@pytest.mark.parametrize("poster", [True, False])
def test_event_tickets_with_the_event_block_validate(
    identity: GoogleIdentity, poster: bool
) -> None:
    """Issue 15: dateTime, venue and seatInfo as Google's discovery document defines them."""
    event = {
        "name": "Spring Tour",
        "type": "live_performance",
        "starts_at": "2031-06-01T20:00:00+02:00",
        "ends_at": "2031-06-01T23:00:00+02:00",
        "doors_open_at": "2031-06-01T18:30:00+02:00",
        "venue": {"name": "Arena", "address": "1 Main Street", "region": "Venice", "room": "A"},
        "performers": ["The Band"],
        "seat_fields": {"number": "seat", "gate": "gate"},
        "poster": poster,
    }
    design = make_design(event=event, localizations={"fr": {"Spring Tour": "Tournée"}})

    resource_class = sample_class(identity, "event", design, logo_url=LOGO_URL)
    resource = sample_object(identity, "event", design)

    assert {"dateTime", "venue"} <= set(resource_class)
    assert "seatInfo" in resource
    assert walletschema.errors("EventTicketClass", resource_class) == []
    assert walletschema.errors("EventTicketObject", resource) == []


def test_a_venue_without_its_address_fails(identity: GoogleIdentity) -> None:
    event = {"name": "T", "starts_at": "2031-06-01T20:00Z", "venue": {"name": "A", "address": "B"}}
    resource = sample_class(identity, "event", make_design(event=event))
    del resource["venue"]["address"]
    assert any("address" in error for error in walletschema.errors("EventTicketClass", resource))


@pytest.mark.parametrize("template_type", TEMPLATE_TYPES)
def test_every_class_field_a_design_makes_is_one_an_update_replaces(
    identity: GoogleIdentity, template_type: str
) -> None:
    """A class update keeps the fields at Google that the design does not decide (console
    ones): a field build_class makes but CLASS_FIELDS_OF_DESIGN leaves out would never be
    removed from the class once the design dropped it."""
    event = {
        "name": "Spring Tour",
        "starts_at": "2031-06-01T20:00:00+02:00",
        "ends_at": "2031-06-01T23:00:00+02:00",
        "doors_open_at": "2031-06-01T18:30:00+02:00",
        "venue": {"name": "Arena", "address": "1 Main Street"},
    }
    strings = {"Summer Festival 2026": "Festival", "Spring Tour": "Tournée", "Acme Events": "A"}
    extra = {"event": event} if template_type == "event" else {}
    design = make_design(localizations={"fr": strings}, **extra)
    richest = sample_class(
        identity, template_type, design, logo_url=LOGO_URL, callback_url=CALLBACK_URL
    )

    assert set(richest) <= CLASS_FIELDS_OF_DESIGN
