"""Tests for pass.json rendering: top-level keys, fields, barcodes, dates and locations."""

import datetime
import re
from typing import Any

import pytest

from services.issuer.passjson import render_field, render_pass_json
from shared.apple_identity import SigningIdentity, ensure_dev_identity
from shared.design import Design, DesignField
from tests.issuer.event_samples import APPLE_EXTRA_KEYS, EVENT, poster_content
from tests.issuer.pkpass_samples import TOKEN, content, minimal_design, sample

# What a W3C date-time allows (https://www.w3.org/TR/NOTE-datetime): `Z` or a `+hh:mm` offset.
W3C_DATE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})")


@pytest.fixture(scope="module")
def identity(tmp_path_factory: pytest.TempPathFactory) -> SigningIdentity:
    return ensure_dev_identity(tmp_path_factory.mktemp("signing"))


def _design(**overrides: Any) -> Design:
    data: dict[str, Any] = {"organization_name": "Tessera", "description": "Test pass"}
    data.update(overrides)
    return Design.model_validate(data)


def _field(**data: Any) -> DesignField:
    return DesignField.model_validate({"key": "f", "label": "F", "slot": "secondary", **data})


def test_pass_json_top_level(identity: SigningIdentity) -> None:
    design = _design(
        logo_text="Tessera Live",
        colors={"background": "#1a2B3c", "foreground": "#FFFFFF", "label": "#000000"},
    )
    document = render_pass_json(
        content(design, web_service_url="https://passes.example.com/apple"), identity
    )

    assert document["formatVersion"] == 1
    assert document["passTypeIdentifier"] == "pass.dev.tessera"
    assert document["teamIdentifier"] == "TESSERADEV"
    assert document["serialNumber"] == "SER-1"
    assert document["organizationName"] == "Tessera"
    assert document["description"] == "Test pass"
    assert document["logoText"] == "Tessera Live"
    assert document["backgroundColor"] == "rgb(26, 43, 60)"
    assert document["foregroundColor"] == "rgb(255, 255, 255)"
    assert document["labelColor"] == "rgb(0, 0, 0)"
    assert document["authenticationToken"] == TOKEN
    assert document["webServiceURL"] == "https://passes.example.com/apple"
    assert "voided" not in document
    assert "barcodes" not in document


def test_optional_keys_absent_by_default(identity: SigningIdentity) -> None:
    document = render_pass_json(content(_design()), identity)

    for key in (
        "logoText",
        "webServiceURL",
        "voided",
        "barcodes",
        "barcode",
        "expirationDate",
        "relevantDate",
        "locations",
        "maxDistance",
        "groupingIdentifier",
        "suppressStripShine",
        "sharingProhibited",
    ):
        assert key not in document


def test_voided_flag(identity: SigningIdentity) -> None:
    assert render_pass_json(content(voided=True), identity)["voided"] is True


def test_dates_locations_and_flags_from_the_design(identity: SigningIdentity) -> None:
    document = render_pass_json(sample("eventTicket", "rich"), identity)

    assert document["expirationDate"] == "2031-12-31T23:59:00+01:00"
    assert document["relevantDate"] == "2031-06-01T19:30:00+00:00"
    assert document["locations"] == [
        {"latitude": 48.8566, "longitude": 2.3522, "relevantText": "Welcome to Paris"},
        {"latitude": -33.87, "longitude": 151.21, "altitude": 12.5},
    ]
    assert document["maxDistance"] == 500
    assert document["groupingIdentifier"] == "tour-2031"
    assert document["suppressStripShine"] is True
    assert document["sharingProhibited"] is False


def test_pass_dates_override_the_design(identity: SigningIdentity) -> None:
    design = _design(expiration_date="2030-01-01T00:00:00Z", relevant_date="2030-01-01T00:00:00Z")
    paris = datetime.timezone(datetime.timedelta(hours=2))
    override = content(
        design,
        expiration_date=datetime.datetime(2032, 5, 6, 7, 8, 9, tzinfo=paris),
        relevant_date=datetime.datetime(2032, 5, 6, 6, 0, tzinfo=datetime.UTC),
    )

    design_only = render_pass_json(content(design), identity)
    overridden = render_pass_json(override, identity)
    metadata_only = render_pass_json(
        content(_design(), relevant_date=datetime.datetime(2033, 1, 1, tzinfo=datetime.UTC)),
        identity,
    )

    assert design_only["expirationDate"] == "2030-01-01T00:00:00+00:00"
    assert overridden["expirationDate"] == "2032-05-06T07:08:09+02:00"
    assert overridden["relevantDate"] == "2032-05-06T06:00:00+00:00"
    assert metadata_only["relevantDate"] == "2033-01-01T00:00:00+00:00"
    assert "expirationDate" not in metadata_only


def test_one_relevant_date_is_written_both_ways(identity: SigningIdentity) -> None:
    document = render_pass_json(content(_design(relevant_date="2031-06-01T19:30:00Z")), identity)

    # relevantDate for iOS before 18; relevantDates for 18 and later, its one entry under
    # iOS 18's key and Apple's current one (`date`, iOS 26).
    assert document["relevantDate"] == "2031-06-01T19:30:00+00:00"
    assert document["relevantDates"] == [
        {"date": "2031-06-01T19:30:00+00:00", "relevantDate": "2031-06-01T19:30:00+00:00"}
    ]


def test_relevant_windows_become_relevant_dates(identity: SigningIdentity) -> None:
    windows = [
        {"start_date": "2031-06-02T18:00:00+02:00", "end_date": "2031-06-02T23:00:00+02:00"},
        {"start_date": "2031-06-01T18:00:00+02:00", "end_date": "2031-06-01T23:00:00+02:00"},
    ]
    only_windows = render_pass_json(content(_design(relevant_dates=windows)), identity)
    with_moment = render_pass_json(
        content(_design(relevant_dates=windows[:1], relevant_date="2031-06-02T19:30:00+02:00")),
        identity,
    )

    assert only_windows["relevantDates"] == [
        {"startDate": "2031-06-02T18:00:00+02:00", "endDate": "2031-06-02T23:00:00+02:00"},
        {"startDate": "2031-06-01T18:00:00+02:00", "endDate": "2031-06-01T23:00:00+02:00"},
    ]
    # Older iOS reads one moment: the earliest start.
    assert only_windows["relevantDate"] == "2031-06-01T18:00:00+02:00"
    assert with_moment["relevantDate"] == "2031-06-02T19:30:00+02:00"
    assert with_moment["relevantDates"] == [
        {"date": "2031-06-02T19:30:00+02:00", "relevantDate": "2031-06-02T19:30:00+02:00"},
        {"startDate": "2031-06-02T18:00:00+02:00", "endDate": "2031-06-02T23:00:00+02:00"},
    ]


def test_a_pass_relevant_date_replaces_the_design_windows(identity: SigningIdentity) -> None:
    design = _design(
        relevant_dates=[{"start_date": "2031-06-01T18:00Z", "end_date": "2031-06-01T23:00Z"}]
    )
    own = datetime.datetime(2031, 7, 1, 20, 0, tzinfo=datetime.UTC)

    document = render_pass_json(content(design, relevant_date=own), identity)

    assert document["relevantDate"] == "2031-07-01T20:00:00+00:00"
    assert document["relevantDates"] == [
        {"date": "2031-07-01T20:00:00+00:00", "relevantDate": "2031-07-01T20:00:00+00:00"}
    ]


def _dates_in(document: Any) -> list[str]:
    """Every date string of a pass.json: the top-level dates, relevantDates and date fields."""
    found = [document[key] for key in ("expirationDate", "relevantDate") if key in document]
    for entry in document.get("relevantDates", []):
        found += entry.values()
    for key in ("headerFields", "primaryFields", "secondaryFields", "auxiliaryFields"):
        found += [f["value"] for f in document["generic"][key] if "dateStyle" in f]
    return found


def test_offsets_with_seconds_stored_earlier_are_written_as_w3c(
    identity: SigningIdentity,
) -> None:
    # Refused on input since; a pass or design stored before still renders a valid pass.json:
    # the offset rounded to the minute, the local time kept.
    lmt = datetime.timezone(datetime.timedelta(hours=5, minutes=30, seconds=15))
    behind = datetime.timezone(-datetime.timedelta(hours=3, minutes=29, seconds=31))
    design = Design.from_stored(
        {
            "organization_name": "Tessera",
            "description": "Test pass",
            "fields": [{"key": "f", "label": "F", "slot": "header", "date_style": "short"}],
        }
    )
    pass_content = content(
        design,
        field_values={"f": "2031-06-01T20:00:00+05:30:15"},
        expiration_date=datetime.datetime(2031, 12, 31, 23, 59, 59, 999999, tzinfo=lmt),
    )

    document = render_pass_json(pass_content, identity)
    relevant = render_pass_json(
        content(design, relevant_date=datetime.datetime(2031, 1, 1, 12, tzinfo=behind)), identity
    )

    assert document["expirationDate"] == "2031-12-31T23:59:59+05:30"
    assert document["generic"]["headerFields"][0]["value"] == "2031-06-01T20:00:00+05:30"
    assert relevant["relevantDate"] == "2031-01-01T12:00:00-03:30"
    for value in _dates_in(document) + _dates_in(relevant):
        assert W3C_DATE.fullmatch(value), value


def test_fields_value_default_and_omitted(identity: SigningIdentity) -> None:
    design = _design(
        fields=[
            {"key": "event", "label": "Event", "slot": "header", "default": "Gala"},
            {"key": "seat", "label": "Seat", "slot": "primary", "default": "GA"},
            {"key": "gate", "label": "Gate", "slot": "secondary"},
            {"key": "row", "label": "Row", "slot": "secondary", "default": "-"},
            {"key": "terms", "label": "Terms", "slot": "back", "default": "No refunds"},
        ]
    )
    style = render_pass_json(
        content(design, field_values={"seat": "12A", "row": "7", "unused": "x"}), identity
    )["generic"]

    assert style["headerFields"] == [{"key": "event", "label": "Event", "value": "Gala"}]
    assert style["primaryFields"] == [{"key": "seat", "label": "Seat", "value": "12A"}]
    assert style["secondaryFields"] == [{"key": "row", "label": "Row", "value": "7"}]
    assert style["auxiliaryFields"] == []
    assert style["backFields"] == [{"key": "terms", "label": "Terms", "value": "No refunds"}]


def test_holder_name_added_as_secondary_field(identity: SigningIdentity) -> None:
    design = _design(fields=[{"key": "tier", "label": "Tier", "slot": "secondary"}])
    secondary = render_pass_json(
        content(design, holder_name="Ada Lovelace", field_values={"tier": "Gold"}), identity
    )["generic"]["secondaryFields"]

    assert secondary[-1] == {"key": "holder_name", "label": "Name", "value": "Ada Lovelace"}


@pytest.mark.parametrize("blank", ["", "   "])
def test_an_empty_holder_name_is_no_name(identity: SigningIdentity, blank: str) -> None:
    """It took a secondary slot with a blank "Name" field (and an empty attendeeName), while
    the landing page and Google read it as no name."""
    design = _design(fields=[{"key": "tier", "label": "Tier", "slot": "secondary"}])
    secondary = render_pass_json(
        content(design, holder_name=blank, field_values={"tier": "Gold"}), identity
    )["generic"]["secondaryFields"]
    assert [field["key"] for field in secondary] == ["tier"]


def test_holder_name_not_added_when_slot_full_or_key_taken(identity: SigningIdentity) -> None:
    full = _design(
        fields=[
            {"key": f"s{i}", "label": "S", "slot": "secondary", "default": "v"} for i in range(4)
        ]
    )
    taken = _design(fields=[{"key": "holder_name", "label": "Guest", "slot": "primary"}])

    full_style = render_pass_json(content(full, holder_name="Ada"), identity)["generic"]
    taken_style = render_pass_json(
        content(taken, holder_name="Ada", field_values={"holder_name": "A. L."}), identity
    )["generic"]

    assert [f["key"] for f in full_style["secondaryFields"]] == ["s0", "s1", "s2", "s3"]
    assert taken_style["secondaryFields"] == []
    assert taken_style["primaryFields"] == [
        {"key": "holder_name", "label": "Guest", "value": "A. L."}
    ]


def test_the_holder_field_leaves_a_shared_secondary_and_auxiliary_row_of_four(
    identity: SigningIdentity,
) -> None:
    """A store card shows four secondary and auxiliary fields together: with three of them and
    one auxiliary there is no room for the holder's name (Wallet would hide a field)."""
    design = Design.model_validate(
        {
            **minimal_design("storeCard"),
            "fields": [
                {"key": "a", "label": "A", "slot": "secondary", "default": "v"},
                {"key": "b", "label": "B", "slot": "secondary", "default": "v"},
                {"key": "c", "label": "C", "slot": "secondary", "default": "v"},
                {"key": "d", "label": "D", "slot": "auxiliary", "default": "v"},
            ],
        }
    )
    style = render_pass_json(content(design, apple_style="storeCard", holder_name="Ada"), identity)[
        "storeCard"
    ]
    shown = style["secondaryFields"] + style["auxiliaryFields"]
    assert [field["key"] for field in shown] == ["a", "b", "c", "d"]


def test_the_holder_field_of_an_updatable_pass_says_when_it_changed(
    identity: SigningIdentity,
) -> None:
    design = _design(fields=[])
    updatable = content(design, holder_name="Ada", web_service_url="https://passes.example.com")
    [holder] = render_pass_json(updatable, identity)["generic"]["secondaryFields"]
    assert holder["changeMessage"] == "Changed to %@"


def test_an_empty_value_shows_the_default_as_google_wallet_does() -> None:
    gate = DesignField(key="gate", label="Gate", slot="secondary", default="A")
    assert render_field(gate, {"gate": ""}) == {"key": "gate", "label": "Gate", "value": "A"}
    no_default = DesignField(key="gate", label="Gate", slot="secondary")
    assert render_field(no_default, {"gate": ""}) is None


def test_field_options_are_rendered() -> None:
    dated = _field(date_style="long", time_style="none", ignores_time_zone=True, is_relative=True)
    money = _field(currency_code="USD")
    styled = _field(slot="auxiliary", text_alignment="center", change_message="Now %@")
    back = _field(slot="back", data_detectors=[])

    assert render_field(dated, {"f": "2031-01-02T03:04Z"}) == {
        "key": "f",
        "label": "F",
        "value": "2031-01-02T03:04:00+00:00",
        "dateStyle": "PKDateStyleLong",
        "timeStyle": "PKDateStyleNone",
        "ignoresTimeZone": True,
        "isRelative": True,
    }
    assert render_field(money, {"f": " 12.50 "}) == {
        "key": "f",
        "label": "F",
        "value": 12.5,
        "currencyCode": "USD",
    }
    whole = render_field(money, {"f": "7"})
    assert whole is not None
    assert whole["value"] == 7
    assert render_field(styled, {"f": "x"}) == {
        "key": "f",
        "label": "F",
        "value": "x",
        "textAlignment": "PKTextAlignmentCenter",
        "changeMessage": "Now %@",
    }
    assert render_field(back, {"f": "x"}) == {
        "key": "f",
        "label": "F",
        "value": "x",
        "dataDetectorTypes": [],
    }


@pytest.mark.parametrize(
    ("options", "value"),
    [
        ({"date_style": "short"}, "tomorrow"),
        ({"date_style": "short"}, "2031-01-02T03:04:00"),  # no time zone
        ({"time_style": "short"}, "2031-01-02"),
        ({"number_style": "decimal"}, "twelve"),
        ({"number_style": "decimal"}, "NaN"),
        ({"currency_code": "EUR"}, "1e20"),
        # Past the decimal context's exponent limit: comparing it raised Overflow (a 500,
        # and a pass that could no longer be rebuilt, so neither voided nor redacted).
        ({"currency_code": "EUR"}, "1e1000000"),
        ({"number_style": "decimal"}, "-1E+9999999"),
        ({"number_style": "decimal"}, "1e-1000000"),
    ],
)
def test_unformattable_values_are_plain_text(options: dict[str, Any], value: str) -> None:
    # Wallet refuses a pass whose date field is not a date, or number field not a number.
    assert render_field(_field(**options), {"f": value}) == {
        "key": "f",
        "label": "F",
        "value": value,
    }


@pytest.mark.parametrize(
    ("transit_type", "expected"),
    [
        ("air", "PKTransitTypeAir"),
        ("boat", "PKTransitTypeBoat"),
        ("bus", "PKTransitTypeBus"),
        ("generic", "PKTransitTypeGeneric"),
        ("train", "PKTransitTypeTrain"),
        (None, "PKTransitTypeGeneric"),
    ],
)
def test_boarding_pass_transit_type(
    identity: SigningIdentity, transit_type: str | None, expected: str
) -> None:
    rendered = render_pass_json(
        content(_design(transit_type=transit_type), apple_style="boardingPass"), identity
    )

    assert rendered["boardingPass"]["transitType"] == expected


def test_transit_type_only_on_boarding_passes(identity: SigningIdentity) -> None:
    rendered = render_pass_json(
        content(_design(transit_type="air"), apple_style="eventTicket"), identity
    )

    assert "transitType" not in rendered["eventTicket"]


@pytest.mark.parametrize(
    ("fmt", "expected"),
    [
        ("qr", "PKBarcodeFormatQR"),
        ("pdf417", "PKBarcodeFormatPDF417"),
        ("aztec", "PKBarcodeFormatAztec"),
        ("code128", "PKBarcodeFormatCode128"),
    ],
)
def test_barcode_format_and_message(identity: SigningIdentity, fmt: str, expected: str) -> None:
    barcode = {
        "format": fmt,
        "message": "T:{serial_number}/{short_id}/{field_values.seat}/{field_values.nope}/{ other }",
        "alt_text": "Scan me",
    }
    document = render_pass_json(
        content(_design(barcode=barcode), field_values={"seat": "12A"}), identity
    )

    rendered = {
        "format": expected,
        "message": "T:SER-1/abc123/12A//{ other }",
        "messageEncoding": "iso-8859-1",
        "altText": "Scan me",
    }
    assert document["barcodes"] == [rendered]
    if fmt == "code128":
        assert "barcode" not in document  # iOS before 9 cannot show Code 128
    else:
        assert document["barcode"] == rendered


def test_barcode_without_alt_text(identity: SigningIdentity) -> None:
    barcode = render_pass_json(content(_design(barcode={})), identity)["barcodes"][0]

    assert barcode["message"] == "SER-1"
    assert "altText" not in barcode


def test_several_barcodes_and_the_legacy_key(identity: SigningIdentity) -> None:
    barcodes = [
        {"format": "code128", "message": "{short_id}"},
        {"format": "pdf417", "message": "P"},
        {"format": "qr", "message": "Q"},
    ]
    document = render_pass_json(content(_design(barcodes=barcodes)), identity)

    assert [b["format"] for b in document["barcodes"]] == [
        "PKBarcodeFormatCode128",
        "PKBarcodeFormatPDF417",
        "PKBarcodeFormatQR",
    ]
    assert document["barcode"] == document["barcodes"][1]  # first format iOS 8 can show


def test_barcode_message_outside_latin1_is_utf8(identity: SigningIdentity) -> None:
    design = _design(barcode={"message": "Zoë {field_values.name}"})
    barcode = render_pass_json(content(design, field_values={"name": "東京"}), identity)[
        "barcodes"
    ][0]

    assert barcode["message"] == "Zoë 東京"
    assert barcode["messageEncoding"] == "utf-8"


def test_every_sample_renders_with_its_style_key_only(identity: SigningIdentity) -> None:
    for style in ("eventTicket", "generic", "storeCard", "coupon", "boardingPass"):
        document = render_pass_json(sample(style, "rich"), identity)
        styles = {"eventTicket", "generic", "storeCard", "coupon", "boardingPass"}
        assert styles.intersection(document) == {style}


def test_barcodes_with_an_empty_message_are_left_out(identity: SigningIdentity) -> None:
    barcodes = [
        {"format": "qr", "message": "{field_values.member}"},
        {"format": "code128", "message": "{short_id}"},
    ]
    design = _design(barcodes=barcodes)

    without = render_pass_json(content(design), identity)
    with_value = render_pass_json(content(design, field_values={"member": "M1"}), identity)

    assert [b["message"] for b in without["barcodes"]] == ["abc123"]
    assert "barcode" not in without  # the remaining one is Code 128
    assert [b["message"] for b in with_value["barcodes"]] == ["M1", "abc123"]
    assert with_value["barcode"]["message"] == "M1"
    assert "barcodes" not in render_pass_json(
        content(_design(barcode={"message": "{field_values.x}"})), identity
    )


def test_fields_of_an_updatable_pass_carry_a_change_message(identity: SigningIdentity) -> None:
    design = _design(
        fields=[
            {"key": "seat", "label": "Seat", "slot": "primary"},
            {"key": "gate", "label": "Gate", "slot": "secondary", "change_message": "Gate %@"},
        ]
    )
    values = {"seat": "12A", "gate": "B"}
    updatable = render_pass_json(
        content(design, field_values=values, web_service_url="https://w.example.com"), identity
    )["generic"]
    assert updatable["primaryFields"][0]["changeMessage"] == "Changed to %@"
    assert updatable["secondaryFields"][0]["changeMessage"] == "Gate %@"
    # Without a web service the pass never changes on a device: only the design's own message.
    static = render_pass_json(content(design, field_values=values), identity)["generic"]
    assert "changeMessage" not in static["primaryFields"][0]
    assert static["secondaryFields"][0]["changeMessage"] == "Gate %@"


def test_the_event_block_becomes_semantic_tags_and_poster_keys(identity: SigningIdentity) -> None:
    """Issue 15: iOS 18 poster event tickets, with the classic eventTicket as the fallback."""
    document = render_pass_json(poster_content(), identity)

    assert document["preferredStyleSchemes"] == ["posterEventTicket", "eventTicket"]
    assert "eventTicket" in document  # what a device that cannot show the poster shows
    assert {key: document[key] for key in APPLE_EXTRA_KEYS} == APPLE_EXTRA_KEYS
    assert document["semantics"] == {
        "eventName": "Spring Tour",
        "eventType": "PKEventTypeLivePerformance",
        "eventStartDate": "2031-06-01T20:00:00+02:00",
        "eventEndDate": "2031-06-01T23:00:00+02:00",
        "venueDoorsOpenDate": "2031-06-01T18:30:00+02:00",
        "venueName": "Arena",
        "venueRegionName": "Venice, Italy",
        "venueRoom": "Main Stage",
        "venuePhoneNumber": "+39 041 000 000",
        "venueLocation": {"latitude": 45.4408, "longitude": 12.3155},
        "performerNames": ["The Band", "Support Act"],
        "attendeeName": "Ada Lovelace",
        # The pass's own values, or the fields' defaults (section B, gate G2).
        "seats": [{"seatSection": "B", "seatRow": "F", "seatNumber": "12"}],
        "venueEntranceGate": "G2",
    }


def test_a_classic_event_ticket_gets_semantics_but_no_poster_keys(
    identity: SigningIdentity,
) -> None:
    event = {"name": "Tour", "starts_at": "2031-06-01T20:00Z", "seat_fields": {"number": "seat"}}
    design = _design(event=event, fields=[{"key": "seat", "label": "Seat", "slot": "primary"}])

    document = render_pass_json(content(design, apple_style="eventTicket"), identity)
    no_seat = render_pass_json(
        content(design, apple_style="eventTicket", field_values={"seat": "7"}), identity
    )

    assert document["semantics"] == {
        "eventName": "Tour",
        "eventStartDate": "2031-06-01T20:00:00+00:00",
    }
    assert no_seat["semantics"]["seats"] == [{"seatNumber": "7"}]
    assert "preferredStyleSchemes" not in document
    assert not set(APPLE_EXTRA_KEYS) & set(document)
    # Without the block nothing changes.
    assert "semantics" not in render_pass_json(
        content(_design(), apple_style="eventTicket"), identity
    )


def test_sports_teams_become_their_semantic_tags(identity: SigningIdentity) -> None:
    teams = {
        "home_team": {"name": "Venice", "abbreviation": "VEN", "location": "Venice"},
        "away_team": {"abbreviation": "ROM"},
    }
    design = _design(event={**EVENT, "type": "sports", "seat_fields": None, **teams})

    tags = render_pass_json(content(design, apple_style="eventTicket"), identity)["semantics"]

    assert tags["eventType"] == "PKEventTypeSports"
    assert {key: value for key, value in tags.items() if "Team" in key} == {
        "homeTeamName": "Venice",
        "homeTeamAbbreviation": "VEN",
        "homeTeamLocation": "Venice",
        "awayTeamAbbreviation": "ROM",
    }
