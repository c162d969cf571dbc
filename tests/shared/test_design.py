"""Tests for the template `design` model: new options, strict validation, style rules."""

import base64
import datetime
import zlib
from typing import Any

import pytest
from pydantic import ValidationError

from services.issuer.validation import validate_design
from shared.design import STYLE_IMAGES, Design, DesignStyleError
from shared.errors import InvalidRequest
from tests.issuer.pkpass_samples import (
    RICH_VARIANTS,
    all_scales,
    b64,
    chunk_types,
    minimal_design,
    pixels,
    png,
    png_with,
    rich_design,
)

_BASE: dict[str, Any] = {"organization_name": "T", "description": "D"}


def _error(**data: Any) -> tuple[tuple[int | str, ...], str]:
    with pytest.raises(ValidationError) as caught:
        Design.model_validate({**_BASE, **data})
    first = caught.value.errors()[0]
    return first["loc"], first["msg"]


def _field(**data: Any) -> dict[str, Any]:
    return {"key": "f", "label": "F", "slot": "secondary", **data}


def test_old_designs_still_validate_and_dump_the_same_keys_plus_new_defaults() -> None:
    old = {**_BASE, "barcode": {"format": "qr"}, "fields": [_field()], "transit_type": None}

    dumped = Design.model_validate(old).model_dump(mode="json")

    assert dumped["barcode"] == {"format": "qr", "message": "{serial_number}", "alt_text": None}
    assert dumped["barcodes"] == []
    assert dumped["localizations"] == {}
    assert dumped["locations"] == []
    assert dumped["expiration_date"] is None
    assert dumped["images"]["icon"] is None
    assert dumped["source_language"] == "en"
    assert dumped["relevant_dates"] == []


@pytest.mark.parametrize(("style", "variant"), RICH_VARIANTS)
def test_rich_designs_round_trip_and_suit_their_style(style: str, variant: str) -> None:
    design = Design.model_validate(rich_design(style, variant))

    design.check_style(style)
    assert Design.model_validate(design.model_dump(mode="json")) == design


@pytest.mark.parametrize(
    ("data", "loc", "message"),
    [
        ({"localizations": {"pt_BR": {"a": "b"}}}, ("localizations", "pt_BR", "[key]"), "pattern"),
        ({"localizations": {"en": {"": "b"}}}, ("localizations", "en", "", "[key]"), "at least 1"),
        ({"localizations": {"en": {"a": ""}}}, ("localizations", "en", "a"), "at least 1"),
        ({"localizations": {"en": {"a\nb": "c"}}}, ("localizations",), "control character"),
        ({"localizations": {"en": {"a": "b\x00"}}}, ("localizations",), "control character"),
        ({"expiration_date": "2031-01-01T00:00:00"}, ("expiration_date",), "timezone"),
        ({"relevant_date": "soon"}, ("relevant_date",), "datetime"),
        ({"locations": [{"latitude": 91, "longitude": 0}]}, ("locations", 0, "latitude"), "90"),
        ({"locations": [{"latitude": 0}]}, ("locations", 0, "longitude"), "required"),
        ({"locations": [{"latitude": 0, "longitude": 0}] * 11}, ("locations",), "at most 10"),
        ({"locations": [{"latitude": 0, "longitude": 0, "x": 1}]}, ("locations", 0, "x"), "Extra"),
        ({"max_distance": 0}, ("max_distance",), "greater than 0"),
        ({"barcode": {}, "barcodes": [{}]}, (), "not both"),
        ({"barcodes": [{}] * 5}, ("barcodes",), "at most 4"),
        ({"barcode": {"message": ""}}, ("barcode", "message"), "at least 1"),
        ({"fields": [_field(currency_code="eur")]}, ("fields", 0, "currency_code"), "pattern"),
        ({"fields": [_field(change_message="New")]}, ("fields", 0, "change_message"), "%@"),
        (
            {"fields": [_field(date_style="short", number_style="decimal")]},
            ("fields", 0),
            "either a date",
        ),
        (
            {"fields": [_field(number_style="decimal", currency_code="EUR")]},
            ("fields", 0),
            "not both",
        ),
        ({"fields": [_field(is_relative=True)]}, ("fields", 0), "need date_style"),
        (
            {"fields": [_field(slot="primary", text_alignment="left")]},
            ("fields", 0),
            "text_alignment",
        ),
        ({"fields": [_field(data_detectors=["link"])]}, ("fields", 0), "back fields"),
        ({"fields": [_field(date_style="tiny")]}, ("fields", 0, "date_style"), "Input should be"),
        ({"images": {"icon": 5}}, ("images", "icon"), "IconImage"),
        ({"source_language": "english"}, ("source_language",), "pattern"),
        ({"source_language": "pt_BR"}, ("source_language",), "pattern"),
        ({"expiration_date": "2031-01-01T00:00:00+05:30:15"}, ("expiration_date",), "datetime"),
        (
            {"fields": [_field(date_style="short", default="2031-01-01T10:00:00+05:30:15")]},
            ("fields", 0),
            "offset with seconds",
        ),
        (
            {
                "relevant_dates": [
                    {"start_date": "2031-01-01T10:00Z", "end_date": "2031-01-01T10:00Z"}
                ]
            },
            ("relevant_dates", 0),
            "end_date must be after start_date",
        ),
        (
            {"relevant_dates": [{"start_date": "2031-01-01T10:00Z"}]},
            ("relevant_dates", 0, "end_date"),
            "required",
        ),
        (
            {
                "relevant_dates": [
                    {"start_date": "2031-01-01T10:00", "end_date": "2031-01-02T10:00Z"}
                ]
            },
            ("relevant_dates", 0, "start_date"),
            "timezone",
        ),
        (
            {
                "relevant_dates": [
                    {"start_date": "2031-01-01T10:00Z", "end_date": "2031-01-02T10:00Z"}
                ]
                * 11
            },
            ("relevant_dates",),
            "at most 10",
        ),
    ],
)
def test_invalid_designs_name_the_path(
    data: dict[str, Any], loc: tuple[int | str, ...], message: str
) -> None:
    error_loc, error_message = _error(**data)

    assert error_loc == loc
    assert message in error_message


@pytest.mark.parametrize("style", sorted(STYLE_IMAGES))
def test_each_style_allows_only_its_images(style: str) -> None:
    for image in ("icon", "logo", "strip", "thumbnail", "background", "footer"):
        design = Design.model_validate(
            {**minimal_design(style), "images": {image: all_scales(image)}}
        )
        if image in STYLE_IMAGES[style]:
            design.check_style(style)
            continue
        with pytest.raises(DesignStyleError) as caught:
            design.check_style(style)
        assert caught.value.param == f"images.{image}"
        assert f"does not show a {image} image" in str(caught.value)


@pytest.mark.parametrize("other", ["background", "thumbnail"])
def test_event_ticket_strip_excludes_background_and_thumbnail(other: str) -> None:
    images = {"strip": all_scales("strip"), other: all_scales(other)}
    design = Design.model_validate({**minimal_design("eventTicket"), "images": images})

    with pytest.raises(DesignStyleError, match=f"strip image or a {other}") as caught:
        design.check_style("eventTicket")
    assert caught.value.param == "images.strip"


def test_boarding_pass_needs_transit_type_and_grouping_is_for_two_styles() -> None:
    no_transit = Design.model_validate({**_BASE})
    grouped = Design.model_validate({**_BASE, "grouping_identifier": "g"})

    with pytest.raises(DesignStyleError) as caught:
        no_transit.check_style("boardingPass")
    assert caught.value.param == "transit_type"
    with pytest.raises(DesignStyleError) as caught:
        grouped.check_style("coupon")
    assert caught.value.param == "grouping_identifier"
    grouped.check_style("eventTicket")
    with pytest.raises(DesignStyleError, match="unknown apple_style"):
        grouped.check_style("poster")


def _fields(*slots: str) -> list[dict[str, str]]:
    return [{"key": f"f{n}", "label": f"F{n}", "slot": slot} for n, slot in enumerate(slots)]


@pytest.mark.parametrize("style", ["coupon", "eventTicket", "generic", "storeCard"])
def test_a_second_primary_field_is_refused_where_wallet_hides_it(style: str) -> None:
    """Issue 15: a second primary field on a coupon was silently hidden by Wallet."""
    design = Design.model_validate({**_BASE, "fields": _fields("header", "primary", "primary")})
    with pytest.raises(DesignStyleError, match=f"{style} shows 1 primary field") as caught:
        design.check_style(style)
    assert caught.value.param == "fields.2.slot"
    assert "'f2'" in str(caught.value)
    two = Design.model_validate({**_BASE, "fields": _fields("primary", "primary")})
    two.model_copy(update={"transit_type": "air"}).check_style("boardingPass")


@pytest.mark.parametrize("style", ["coupon", "storeCard"])
def test_coupons_and_store_cards_show_four_secondary_and_auxiliary_fields_together(
    style: str,
) -> None:
    slots = ("secondary", "auxiliary", "secondary", "auxiliary")
    Design.model_validate({**_BASE, "fields": _fields(*slots)}).check_style(style)
    five = Design.model_validate({**_BASE, "fields": _fields(*slots, "auxiliary", "back")})
    with pytest.raises(DesignStyleError, match="at most 4 secondary and auxiliary") as caught:
        five.check_style(style)
    assert caught.value.param == "fields.4.slot"


def test_a_generic_pass_counts_them_together_only_with_a_square_barcode() -> None:
    slots = _fields("secondary", "secondary", "auxiliary", "auxiliary", "auxiliary")
    for square in ("qr", "aztec"):
        design = Design.model_validate({**_BASE, "fields": slots, "barcode": {"format": square}})
        with pytest.raises(DesignStyleError, match="generic pass with a square barcode"):
            design.check_style("generic")
    for rectangular in ("pdf417", "code128"):
        barcode = {"format": rectangular}
        Design.model_validate({**_BASE, "fields": slots, "barcode": barcode}).check_style("generic")
    Design.model_validate({**_BASE, "fields": slots}).check_style("eventTicket")


def test_barcode_list_prefers_whichever_is_set() -> None:
    single = Design.model_validate({**_BASE, "barcode": {"format": "aztec"}})
    several = Design.model_validate({**_BASE, "barcodes": [{"format": "qr"}, {"format": "pdf417"}]})

    assert [b.format for b in single.barcode_list()] == ["aztec"]
    assert [b.format for b in several.barcode_list()] == ["qr", "pdf417"]
    assert Design.model_validate(_BASE).barcode_list() == []


def test_json_schema_accepts_a_string_or_scales_for_images() -> None:
    schema = Design.model_json_schema()
    icon = schema["$defs"]["IconImage"]

    assert icon["anyOf"][0]["type"] == "string"
    assert icon["anyOf"][1]["required"] == ["x1"]


def _texty_logo() -> bytes:
    """A logo with a zTXt chunk that inflates to 50 MB and HTML in tEXt and iTXt chunks."""
    html = b"<html><script>alert(document.cookie)</script></html>"
    bomb = zlib.compress(b"\0" * (50 * 1024 * 1024), 9)
    return png_with(
        png(160, 50),
        (b"zTXt", b"Comment\0\0" + bomb),
        (b"tEXt", b"Description\0" + html),
        (b"iTXt", b"XML:com.adobe.xmp\0\0\0\0\0" + html),
    )


def test_a_design_keeps_its_images_without_text_chunks() -> None:
    logo = b64(_texty_logo())
    for images in ({"logo": logo}, {"logo": {"x1": b64(png(5, 5)), "x2": logo}}):
        body = {**minimal_design("generic"), "images": images}

        # As the issuer stores it: validated, then dumped into the template record.
        stored = validate_design(body, "generic").model_dump(mode="json")["images"]["logo"]

        cleaned = base64.b64decode(stored if isinstance(stored, str) else stored["x2"])
        assert chunk_types(cleaned) == [b"IHDR", b"IDAT", b"IEND"]
        assert b"<script>" not in cleaned
        assert pixels(cleaned) == pixels(png(160, 50))


def test_an_image_that_does_not_decode_is_refused_with_its_param() -> None:
    broken = png(30, 10)[:33] + png(8, 8)[33:]  # the IDAT holds too few pixels for the IHDR
    design = {**minimal_design("generic"), "images": {"logo": {"x1": b64(png(5, 5))}}}
    design["images"]["logo"]["x3"] = b64(broken)

    with pytest.raises(InvalidRequest) as caught:
        validate_design(design, "generic")

    assert caught.value.param == "design.images.logo.x3"
    assert "image 'logo@3x' could not be decoded as a PNG" in caught.value.message


def test_dates_pydantic_reads_but_w3c_cannot_write_are_refused() -> None:
    # A datetime object (not a string, which pydantic's own parser refuses) with seconds in
    # its offset: what the api or the issuer could hand over in Python.
    lmt = datetime.timezone(datetime.timedelta(hours=-4, minutes=-56, seconds=-2))
    moment = datetime.datetime(2031, 1, 1, tzinfo=lmt)
    window = {"start_date": moment, "end_date": moment + datetime.timedelta(hours=1)}

    for data, loc in (
        ({"relevant_date": moment}, ("relevant_date",)),
        ({"relevant_dates": [window]}, ("relevant_dates", 0, "start_date")),
    ):
        error_loc, error_message = _error(**data)
        assert (error_loc, "offset with seconds" in error_message) == (loc, True)
    # A design stored before they were refused still loads (pass.json rounds the offset).
    stored = Design.from_stored({**_BASE, "relevant_date": moment})
    assert stored.relevant_date == moment


def test_date_field_defaults_that_are_text_or_w3c_dates_are_kept() -> None:
    for default in ("To be announced", "2031-01-01T10:00:00+05:30", "2031-01-01T10:00Z"):
        design = Design.model_validate(
            {**_BASE, "fields": [_field(date_style="short", default=default)]}
        )
        assert design.fields[0].default == default


@pytest.mark.parametrize(
    ("logo", "message"),
    [
        (png(600, 600), "image 'google_logo' is 600x600 px; at least 660x660 px"),
        (png(800, 660), "image 'google_logo' is 800x660 px; it must be square"),
        (b"not a png at all", "image 'google_logo' is not a PNG"),
    ],
    ids=["small", "not-square", "not-png"],
)
def test_a_google_logo_that_is_not_a_big_enough_square_is_refused(
    logo: bytes, message: str
) -> None:
    """Issue 15: Google Wallet wants a square logo of at least 660x660 px."""
    with pytest.raises(InvalidRequest) as caught:
        validate_design({**minimal_design("generic"), "google_logo": b64(logo)}, "generic")

    assert caught.value.param == "design.google_logo"
    assert message in caught.value.message


def test_a_google_logo_is_kept_cleaned_for_every_style() -> None:
    texty = png_with(png(660, 660), (b"tEXt", b"Comment\0<script>"))
    for style in sorted(STYLE_IMAGES):
        design = validate_design({**minimal_design(style), "google_logo": b64(texty)}, style)

        assert design.google_logo is not None
        cleaned = base64.b64decode(design.google_logo)
        assert chunk_types(cleaned) == [b"IHDR", b"IDAT", b"IEND"]
        assert pixels(cleaned) == pixels(png(660, 660))
