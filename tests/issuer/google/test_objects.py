"""Template and pass -> Wallet class and object: the mapping rules, one at a time."""

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from services.issuer.google.identity import GoogleIdentity
from services.issuer.google.objects import (
    HOLDER_MODULE_ID,
    build_class,
    expand_barcode_message,
    vertical_for,
)
from shared.google_ids import class_id, object_id, pass_id_of
from tests.issuer.google.samples import (
    CALLBACK_URL,
    LOGO_URL,
    PASS_ID,
    PLACEHOLDER_LOGO_URL,
    SERIAL,
    SHORT_ID,
    TEMPLATE_ID,
    make_design,
    sample_class,
    sample_object,
)


@pytest.mark.parametrize(
    ("template_type", "vertical"),
    [
        ("event", "eventTicket"),
        ("membership", "loyalty"),
        ("loyalty", "loyalty"),
        ("coupon", "offer"),
        ("generic", "generic"),
    ],
)
def test_template_type_to_vertical(template_type: str, vertical: str) -> None:
    assert vertical_for(template_type) == vertical


def test_unknown_template_type_is_refused() -> None:
    with pytest.raises(ValueError, match="no Google Wallet vertical"):
        vertical_for("boardingPass")


def test_ids_are_issuer_dot_tessera_id(identity: GoogleIdentity) -> None:
    resource = sample_object(identity, "event")

    assert resource["id"] == f"{identity.issuer_id}.{PASS_ID}"
    assert resource["classId"] == f"{identity.issuer_id}.{TEMPLATE_ID}"
    assert sample_class(identity, "event")["id"] == resource["classId"]
    # Stable: the same pass always maps to the same object, whatever its content.
    assert sample_object(identity, "event", voided=True, field_values={})["id"] == resource["id"]


@pytest.mark.parametrize("bad", ["pass 1", "pass/1", "", "pässe", "a:b"])
def test_ids_refuse_characters_wallet_does_not_allow(bad: str) -> None:
    with pytest.raises(ValueError, match="not usable in a Wallet id"):
        object_id("3388000000000000000", bad)
    with pytest.raises(ValueError, match="not usable in a Wallet id"):
        class_id("3388000000000000000", bad)


def test_barcode_placeholders_expand_like_apple() -> None:
    message = expand_barcode_message(
        "S={serial_number} I={short_id} F={field_values.seat} M={field_values.none} {other}",
        serial_number="SER",
        short_id="SID",
        field_values={"seat": "12A"},
    )
    assert message == "S=SER I=SID F=12A M= {other}"


@pytest.mark.parametrize(
    ("design_format", "google_type"),
    [("qr", "QR_CODE"), ("pdf417", "PDF_417"), ("aztec", "AZTEC"), ("code128", "CODE_128")],
)
def test_barcode_type_value_and_alternate_text(
    identity: GoogleIdentity, design_format: str, google_type: str
) -> None:
    barcode = {"format": design_format, "message": "{short_id}-{field_values.seat}"}
    resource = sample_object(identity, "coupon", make_design(barcode=barcode))

    assert resource["barcode"] == {"type": google_type, "value": f"{SHORT_ID}-12A"}


def test_barcode_carries_the_alt_text_and_no_barcode_means_none(identity: GoogleIdentity) -> None:
    assert sample_object(identity, "event")["barcode"] == {
        "type": "QR_CODE",
        "value": f"{SERIAL}|{SHORT_ID}|12A",
        "alternateText": "Show at the gate",
    }
    assert "barcode" not in sample_object(identity, "event", make_design(barcode=None))


def test_a_barcode_whose_message_expands_to_nothing_is_left_out_like_apple(
    identity: GoogleIdentity,
) -> None:
    empty = {"format": "code128", "message": "{field_values.missing}"}
    design = make_design(barcode=empty)
    assert "barcode" not in sample_object(identity, "event", design)
    # With several, the first that expands to something, as in the pass.json.
    shown = {"format": "qr", "message": "{field_values.seat}"}
    design = make_design(barcode=None, barcodes=[empty, shown])
    assert sample_object(identity, "event", design)["barcode"] == {
        "type": "QR_CODE",
        "value": "12A",
    }


def test_fields_become_text_modules_with_defaults(identity: GoogleIdentity) -> None:
    resource = sample_object(identity, "loyalty", field_values={"seat": "12A", "notes": ""})

    # seat from the pass, gate from the design default, notes empty with no default: left out.
    assert resource["textModulesData"] == [
        {"id": "seat", "header": "Seat", "body": "12A"},
        {"id": "gate", "header": "Gate", "body": "B"},
    ]


def test_no_fields_no_text_modules(identity: GoogleIdentity) -> None:
    resource = sample_object(identity, "event", make_design(fields=[]), holder_name=None)
    assert "textModulesData" not in resource


@pytest.mark.parametrize("template_type", ["event", "membership", "coupon", "loyalty", "generic"])
def test_voided_pass_is_inactive(identity: GoogleIdentity, template_type: str) -> None:
    assert sample_object(identity, template_type)["state"] == "ACTIVE"
    assert sample_object(identity, template_type, voided=True)["state"] == "INACTIVE"


def _holder(resource: dict[str, Any]) -> Any:
    for key in ("ticketHolderName", "accountName"):
        if key in resource:
            return resource[key]
    if "subheader" in resource:
        return resource["subheader"]["defaultValue"]["value"]
    modules = {module["id"]: module for module in resource.get("textModulesData", [])}
    return modules[HOLDER_MODULE_ID]["body"] if HOLDER_MODULE_ID in modules else None


@pytest.mark.parametrize("template_type", ["event", "loyalty", "coupon", "generic"])
def test_holder_name_then_email_then_nothing(identity: GoogleIdentity, template_type: str) -> None:
    assert _holder(sample_object(identity, template_type)) == "Ada Lovelace"
    by_email = sample_object(identity, template_type, holder_name=None)
    assert _holder(by_email) == "ada@example.com"
    anonymous = sample_object(identity, template_type, holder_name=None, holder_email=None)
    assert _holder(anonymous) is None


def test_a_coupon_shows_its_holder_first_of_its_text_modules(identity: GoogleIdentity) -> None:
    """Google shows 10 text modules of an object: last, the holder was the eleventh of a
    design with ten fields, and never shown."""
    fields = [{"key": f"f{n}", "label": f"F{n}", "slot": "back", "default": "v"} for n in range(10)]
    modules = sample_object(identity, "coupon", make_design(fields=fields))["textModulesData"]
    assert modules[0]["id"] == HOLDER_MODULE_ID
    assert len(modules) == 11


def test_vertical_specific_object_fields(identity: GoogleIdentity) -> None:
    assert sample_object(identity, "event")["ticketNumber"] == SERIAL
    assert sample_object(identity, "membership")["accountId"] == SHORT_ID
    generic = sample_object(identity, "generic", logo_url=LOGO_URL)
    assert generic["cardTitle"]["defaultValue"] == {"language": "en", "value": "Acme Events"}
    assert generic["header"]["defaultValue"]["value"] == "Summer Festival 2026"
    assert generic["hexBackgroundColor"] == "#1A2B3C"
    assert generic["logo"]["sourceUri"] == {"uri": LOGO_URL}


def test_classes_per_vertical(identity: GoogleIdentity) -> None:
    event = sample_class(identity, "event")
    assert event["issuerName"] == "Acme Events"
    assert event["eventName"] == {
        "defaultValue": {"language": "en", "value": "Summer Festival 2026"}
    }
    assert event["reviewStatus"] == "UNDER_REVIEW"
    assert event["hexBackgroundColor"] == "#1A2B3C"
    loyalty = sample_class(identity, "loyalty")
    assert loyalty["programName"] == "Summer Festival 2026"
    offer = sample_class(identity, "coupon")
    assert (offer["title"], offer["provider"]) == ("Summer Festival 2026", "Acme Events")
    assert offer["redemptionChannel"] == "INSTORE"
    assert sample_class(identity, "generic") == {"id": f"{identity.issuer_id}.{TEMPLATE_ID}"}


@pytest.mark.parametrize("template_type", ["event", "membership", "coupon", "loyalty", "generic"])
def test_every_class_names_the_callback_url(identity: GoogleIdentity, template_type: str) -> None:
    resource = sample_class(identity, template_type, callback_url=CALLBACK_URL)
    assert resource["callbackOptions"] == {"url": CALLBACK_URL}
    assert "callbackOptions" not in sample_class(identity, template_type)


def test_an_object_id_gives_back_its_pass_id(identity: GoogleIdentity) -> None:
    issuer = identity.issuer_id
    pass_id = "pass_0Mx3ZyXwVuTsRqPoNmLkJi"
    assert pass_id_of(issuer, object_id(issuer, pass_id)) == pass_id
    assert pass_id_of("3388000000099999999", object_id(issuer, pass_id)) is None
    assert pass_id_of(issuer, class_id(issuer, TEMPLATE_ID)) is None
    assert pass_id_of(issuer, f"{issuer}.pass_short") is None
    assert pass_id_of(issuer, f"{issuer}{pass_id}") is None


def test_logo_where_each_vertical_takes_it(identity: GoogleIdentity) -> None:
    assert sample_class(identity, "event", logo_url=LOGO_URL)["logo"]["sourceUri"]["uri"] == (
        LOGO_URL
    )
    assert sample_class(identity, "coupon", logo_url=LOGO_URL)["titleImage"]["sourceUri"] == {
        "uri": LOGO_URL
    }
    loyalty = sample_class(identity, "membership", logo_url=LOGO_URL)
    assert loyalty["programLogo"]["sourceUri"]["uri"] == LOGO_URL
    assert loyalty["programLogo"]["contentDescription"]["defaultValue"]["value"] == "Acme Events"


def test_without_a_logo_url_only_loyalty_uses_the_placeholder(identity: GoogleIdentity) -> None:
    assert "logo" not in sample_class(identity, "event")
    assert "titleImage" not in sample_class(identity, "coupon")
    assert "logo" not in sample_object(identity, "generic")
    loyalty = sample_class(identity, "loyalty")
    assert loyalty["programLogo"]["sourceUri"]["uri"] == PLACEHOLDER_LOGO_URL


def test_loyalty_without_any_logo_is_refused(identity: GoogleIdentity) -> None:
    with pytest.raises(ValueError, match="programLogo"):
        build_class(
            identity=identity,
            template_id=TEMPLATE_ID,
            template_type="membership",
            design=make_design(),
        )


LOCALIZED = {"fr": {"Seat": "Place", "Summer Festival 2026": "Festival d'été 2026", "12A": "12 A"}}


def test_translations_reach_google_as_translated_values(identity: GoogleIdentity) -> None:
    """Issue 15: the design's localizations were ignored on Google; Wallet shows a
    LocalizedString's translatedValues by the phone's language, as Apple shows .lproj strings."""
    design = make_design(localizations=LOCALIZED, source_language="en")
    event_class = sample_class(identity, "event", design)
    assert event_class["eventName"] == {
        "defaultValue": {"language": "en", "value": "Summer Festival 2026"},
        "translatedValues": [{"language": "fr", "value": "Festival d'été 2026"}],
    }
    (seat, gate) = sample_object(identity, "event", design)["textModulesData"]
    assert seat["localizedHeader"]["translatedValues"] == [{"language": "fr", "value": "Place"}]
    assert seat["localizedBody"]["translatedValues"] == [{"language": "fr", "value": "12 A"}]
    assert "localizedHeader" not in gate  # "Gate" has no translation
    offer = sample_class(identity, "coupon", design)
    assert offer["localizedTitle"]["translatedValues"][0]["language"] == "fr"
    loyalty = sample_class(identity, "loyalty", design)
    assert loyalty["localizedProgramName"]["defaultValue"]["language"] == "en"
    generic = sample_object(identity, "generic", design)
    assert generic["header"]["translatedValues"][0]["value"] == "Festival d'été 2026"


def test_strings_are_in_the_design_source_language(identity: GoogleIdentity) -> None:
    design = make_design(source_language="de")
    assert sample_class(identity, "event", design)["eventName"]["defaultValue"]["language"] == "de"


def test_the_expiration_date_ends_the_valid_time_interval(identity: GoogleIdentity) -> None:
    """Issue 15: a pass expired in Apple Wallet stayed active in Google Wallet."""
    expires = datetime(2031, 12, 31, 23, 59, tzinfo=timezone(timedelta(hours=1)))
    resource = sample_object(identity, "coupon", expiration_date=expires)
    assert resource["validTimeInterval"] == {"end": {"date": "2031-12-31T23:59:00+01:00"}}
    assert "validTimeInterval" not in sample_object(identity, "coupon")


EVENT = {
    "name": "Spring Tour",
    "starts_at": "2031-06-01T20:00:00+02:00",
    "ends_at": "2031-06-01T23:00:00+02:00",
    "doors_open_at": "2031-06-01T18:30:00+02:00",
    "venue": {"name": "Arena", "address": "1 Main Street\n30100 Venice", "room": "Main Stage"},
    "seat_fields": {"number": "seat", "gate": "gate"},
}


def test_the_event_block_gives_the_class_its_name_dates_and_venue(
    identity: GoogleIdentity,
) -> None:
    """Issue 15: event tickets reached Google without their date or venue."""
    strings = {"Spring Tour": "Tournée de printemps", "Arena": "Arène"}
    design = make_design(event=EVENT, localizations={"fr": strings})

    resource = sample_class(identity, "event", design)

    assert resource["eventName"] == {
        "defaultValue": {"language": "en", "value": "Spring Tour"},
        "translatedValues": [{"language": "fr", "value": "Tournée de printemps"}],
    }
    assert resource["dateTime"] == {
        "start": "2031-06-01T20:00:00+02:00",
        "end": "2031-06-01T23:00:00+02:00",
        "doorsOpen": "2031-06-01T18:30:00+02:00",
    }
    assert resource["venue"] == {
        "name": {
            "defaultValue": {"language": "en", "value": "Arena"},
            "translatedValues": [{"language": "fr", "value": "Arène"}],
        },
        "address": {"defaultValue": {"language": "en", "value": "1 Main Street\n30100 Venice"}},
    }


def test_without_a_venue_or_other_dates_only_the_start_is_sent(identity: GoogleIdentity) -> None:
    design = make_design(event={"name": "Tour", "starts_at": "2031-06-01T20:00Z"})

    resource = sample_class(identity, "event", design)

    assert resource["dateTime"] == {"start": "2031-06-01T20:00:00+00:00"}
    assert "venue" not in resource
    assert "seatInfo" not in sample_object(identity, "event", design)
    # Without the block the class is as before: the description names the event.
    plain = sample_class(identity, "event")
    assert plain["eventName"]["defaultValue"]["value"] == "Summer Festival 2026"
    assert "dateTime" not in plain
    assert "venue" not in plain


def test_the_seat_fields_give_the_object_its_seat_info(identity: GoogleIdentity) -> None:
    design = make_design(event=EVENT)

    with_seat = sample_object(identity, "event", design, field_values={"seat": "12A"})
    default_gate_only = sample_object(identity, "event", design, field_values={})

    assert with_seat["seatInfo"] == {
        "seat": {"defaultValue": {"language": "en", "value": "12A"}},
        "gate": {"defaultValue": {"language": "en", "value": "B"}},  # the field's default
    }
    assert default_gate_only["seatInfo"] == {
        "gate": {"defaultValue": {"language": "en", "value": "B"}}
    }


def test_the_source_languages_own_strings_are_what_google_shows_by_default(
    identity: GoogleIdentity,
) -> None:
    """An English design that words "Seat" as "Seat no." for English: an English iPhone shows
    "Seat no." (the en.lproj), and so does Google Wallet."""
    own = {"en": {"Seat": "Seat no.", "Summer Festival 2026": "Summer Fest"}, **LOCALIZED}
    design = make_design(localizations=own, source_language="en")
    event_class = sample_class(identity, "event", design)
    assert event_class["eventName"]["defaultValue"] == {"language": "en", "value": "Summer Fest"}
    (seat, _) = sample_object(identity, "event", design)["textModulesData"]
    assert seat["header"] == "Seat no."
    assert seat["localizedHeader"]["defaultValue"]["value"] == "Seat no."
    assert sample_class(identity, "coupon", design)["title"] == "Summer Fest"
