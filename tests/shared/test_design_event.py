"""Tests for the design's `event` block (shared/design_event.py): its shape, its dates, and
what a template and a poster ticket require of it, each refused with its param (issue 15)."""

import datetime
from typing import Any

import pytest

from services.issuer.validation import validate_design
from shared.design import Design, DesignStyleError
from shared.design_event import seat_values
from shared.errors import InvalidRequest
from tests.issuer.pkpass_samples import all_scales, minimal_design

EVENT: dict[str, Any] = {
    "name": "Spring Tour",
    "type": "live_performance",
    "starts_at": "2031-06-01T20:00:00+02:00",
    "ends_at": "2031-06-01T23:00:00+02:00",
    "doors_open_at": "2031-06-01T18:30:00+02:00",
    "venue": {
        "name": "Arena",
        "address": "1 Main Street\nVenice",
        "region": "Venice, Italy",
        "room": "Main Stage",
        "latitude": 45.43,
        "longitude": 12.33,
    },
    "performers": ["The Band"],
    "seat_fields": {"row": "row", "number": "seat"},
    "poster": True,
}


def _design(event: dict[str, Any] | None = None, **overrides: Any) -> dict[str, Any]:
    design = minimal_design("eventTicket")
    design["fields"] = [
        {"key": "seat", "label": "Seat", "slot": "primary"},
        {"key": "row", "label": "Row", "slot": "secondary", "default": "F"},
    ]
    return {**design, "event": EVENT if event is None else event, **overrides}


def _refused(design: dict[str, Any], apple_style: str = "eventTicket", kind: str = "event") -> str:
    with pytest.raises(InvalidRequest) as caught:
        validate_design(design, apple_style, kind)
    assert caught.value.status == 400
    param = caught.value.param
    assert param is not None
    return param


def test_a_full_event_block_is_accepted_and_round_trips() -> None:
    design = validate_design(_design(), "eventTicket", "event")

    assert design.event is not None
    assert design.event.venue is not None
    assert design.event.venue.room == "Main Stage"
    assert Design.from_stored(design.model_dump(mode="json")) == design
    # Without the block a design is as before.
    assert validate_design(minimal_design("eventTicket"), "eventTicket", "event").event is None


@pytest.mark.parametrize(
    ("apple_style", "kind"),
    [("generic", "event"), ("eventTicket", "membership"), ("coupon", "coupon")],
)
def test_the_block_is_only_for_event_templates_shown_as_event_tickets(
    apple_style: str, kind: str
) -> None:
    design = {**_design(), "fields": [{"key": "seat", "label": "Seat", "slot": "primary"}]}
    design["event"] = {"name": "Tour", "starts_at": "2031-06-01T20:00Z"}

    assert _refused(design, apple_style, kind) == "design.event"


@pytest.mark.parametrize(
    ("change", "param"),
    [
        ({"ends_at": "2031-06-01T19:00:00+02:00"}, "design.event"),
        ({"doors_open_at": "2031-06-01T20:30:00+02:00"}, "design.event"),
        ({"starts_at": "2031-06-01T20:00:00"}, "design.event.starts_at"),
        ({"name": ""}, "design.event.name"),
        ({"type": "opera"}, "design.event.type"),
        ({"poster": "sometimes"}, "design.event.poster"),
        ({"tickets": 3}, "design.event.tickets"),
        ({"venue": {**EVENT["venue"], "latitude": None}}, "design.event.venue"),
        ({"venue": {**EVENT["venue"], "latitude": 91}}, "design.event.venue.latitude"),
        ({"venue": {"name": "Arena"}}, "design.event.venue.address"),
        ({"venue": {**EVENT["venue"], "email": "no-at-sign"}}, "design.event.venue.email"),
        ({"links": {"sell": "ftp://example.com/sell"}}, "design.event.links.sell"),
        ({"links": {"sell": "https://example.com/a b"}}, "design.event.links.sell"),
        # A NUL, a right-to-left override disguising the link, and non-ASCII, kept as sent.
        ({"links": {"sell": "https://example.com/a\x00b"}}, "design.event.links.sell"),
        ({"links": {"sell": "https://example.com/\u202egnp.exe"}}, "design.event.links.sell"),
        ({"links": {"sell": "https://bücher.example/ä"}}, "design.event.links.sell"),
        ({"links": {"tickets": "https://example.com"}}, "design.event.links.tickets"),
        ({"seat_fields": {"row": "aisle"}}, "design.event.seat_fields.row"),
    ],
)
def test_a_bad_block_is_refused_with_its_param(change: dict[str, Any], param: str) -> None:
    assert _refused(_design({**EVENT, **change})) == param


def test_an_event_date_with_a_seconds_offset_is_refused_but_a_stored_one_loads() -> None:
    lmt = datetime.timezone(datetime.timedelta(hours=-4, minutes=-56, seconds=-2))
    moment = datetime.datetime(2031, 1, 1, 20, tzinfo=lmt)
    event = {**EVENT, "starts_at": moment, "ends_at": None, "doors_open_at": None}

    with pytest.raises(InvalidRequest) as caught:
        validate_design(_design(event), "eventTicket", "event")

    assert caught.value.param == "design.event.starts_at"
    assert "offset with seconds" in caught.value.message
    stored = Design.from_stored(_design(event))
    assert stored.event is not None
    assert stored.event.starts_at == moment


@pytest.mark.parametrize(
    ("change", "param"),
    [
        ({"venue": None}, "design.event.venue"),
        ({"venue": {**EVENT["venue"], "region": None}}, "design.event.venue.region"),
        ({"venue": {**EVENT["venue"], "room": None}}, "design.event.venue.room"),
        ({"performers": []}, "design.event.performers"),
        ({"type": "sports"}, "design.event.home_team"),
        (
            {"type": "sports", "home_team": {"abbreviation": "VEN"}, "away_team": {"name": "X"}},
            "design.event.away_team",
        ),
    ],
)
def test_a_poster_without_what_apple_requires_is_refused(
    change: dict[str, Any], param: str
) -> None:
    """Wallet shows the classic ticket, silently, when a poster lacks a required tag."""
    assert _refused(_design({**EVENT, **change})) == param
    # The same block is fine for a classic ticket, which needs none of it.
    validate_design(_design({**EVENT, **change, "poster": False}), "eventTicket", "event")


def test_a_poster_needs_a_barcode_and_a_sports_poster_its_teams() -> None:
    assert _refused(_design(barcode=None)) == "design.event.poster"

    teams = {"home_team": {"abbreviation": "VEN"}, "away_team": {"abbreviation": "ROM"}}
    sports = validate_design(_design({**EVENT, "type": "sports", **teams}), "eventTicket")
    assert sports.event is not None
    assert sports.event.type == "sports"


def test_the_artwork_is_only_for_a_poster() -> None:
    poster = _design(images={"artwork": all_scales("logo")})
    classic = _design({**EVENT, "poster": False}, images={"artwork": all_scales("logo")})

    assert validate_design(poster, "eventTicket", "event").images.artwork is not None
    assert _refused(classic) == "design.images.artwork"
    assert _refused({**minimal_design("generic"), "images": poster["images"]}, "generic") == (
        "design.images.artwork"
    )


def test_without_a_template_type_only_the_style_is_checked() -> None:
    """`check_style(apple_style)` alone, as callers that know no type make it."""
    design = Design.model_validate(_design())
    design.check_style("eventTicket")
    with pytest.raises(DesignStyleError) as caught:
        design.check_style("generic")
    assert caught.value.param == "event"


def test_seat_values_take_the_pass_value_then_the_field_default() -> None:
    design = Design.model_validate(_design())
    assert design.event is not None
    defaults = {"row": "F"}

    assert seat_values(design.event, {"seat": "12"}, defaults) == {"row": "F", "number": "12"}
    assert seat_values(design.event, {"row": "G", "seat": ""}, defaults) == {"row": "G"}


def test_an_event_link_saved_before_urls_had_to_be_ascii_still_loads() -> None:
    saved = _design({**EVENT, "links": {"sell": "https://bücher.example/ä"}})
    assert Design.from_stored(saved).event is not None
