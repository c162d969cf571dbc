"""Property tests of the template design model: any valid design round-trips through
model_dump/model_validate and from_stored, and invalid colors, field keys or arbitrary JSON are
refused with a ValidationError, never another exception."""

import contextlib
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from shared.design import SLOT_LIMITS, Colors, Design, DesignField

SETTINGS = settings(max_examples=150, deadline=None)
HEX = st.from_regex(r"\A#[0-9A-Fa-f]{6}\Z")
KEYS = st.from_regex(r"\A[A-Za-z][A-Za-z0-9_]{0,63}\Z")
PRINTABLE = st.text(st.characters(exclude_categories=("Cc", "Cs")), min_size=1, max_size=60)
# A barcode message: text, with braces only around the placeholders a design may use (any other
# braced name is refused as a misspelt placeholder, tests/shared/test_design_barcode.py).
BRACELESS = st.text(
    st.characters(exclude_categories=("Cc", "Cs"), exclude_characters="{}"), min_size=1, max_size=30
)
PLACEHOLDERS = st.sampled_from(["{serial_number}", "{short_id}", "{field_values.seat}"])
BARCODE_MESSAGES = st.lists(BRACELESS | PLACEHOLDERS, min_size=1, max_size=4).map("".join)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=15,
)


@st.composite
def fields(draw: st.DrawFn) -> list[dict[str, Any]]:
    keys = draw(st.lists(KEYS, unique=True, max_size=8))
    chosen: list[dict[str, Any]] = []
    used: dict[str, int] = {}
    for key in keys:
        slot = draw(st.sampled_from(sorted(SLOT_LIMITS)))
        if used.get(slot, 0) >= SLOT_LIMITS[slot]:
            continue
        used[slot] = used.get(slot, 0) + 1
        field: dict[str, Any] = {"key": key, "label": draw(PRINTABLE), "slot": slot}
        if draw(st.booleans()):
            field["default"] = draw(PRINTABLE)
        chosen.append(field)
    return chosen


@st.composite
def designs(draw: st.DrawFn) -> dict[str, Any]:
    design: dict[str, Any] = {
        "organization_name": draw(PRINTABLE),
        "description": draw(PRINTABLE),
        "colors": {"background": draw(HEX), "foreground": draw(HEX), "label": draw(HEX)},
        "fields": draw(fields()),
    }
    if draw(st.booleans()):
        design["logo_text"] = draw(PRINTABLE)
    if draw(st.booleans()):
        design["barcode"] = {
            "format": draw(st.sampled_from(["qr", "pdf417", "aztec", "code128"])),
            "message": draw(BARCODE_MESSAGES),
        }
    if draw(st.booleans()):
        design["locations"] = [
            {
                "latitude": draw(st.floats(min_value=-90, max_value=90)),
                "longitude": draw(st.floats(min_value=-180, max_value=180)),
            }
        ]
    if draw(st.booleans()):
        design["max_distance"] = draw(st.integers(min_value=1, max_value=100_000))
    return design


@SETTINGS
@given(data=designs())
def test_valid_design_round_trips(data: dict[str, Any]) -> None:
    design = Design.model_validate(data)
    assert Design.model_validate(design.model_dump()) == design
    stored = design.model_dump(mode="json")
    assert Design.from_stored(stored) == design
    assert Design.from_stored(stored).model_dump(mode="json") == stored
    assert design.field_keys() == {field["key"] for field in data["fields"]}


@SETTINGS
@given(color=st.text(max_size=12))
def test_invalid_colors_are_refused(color: str) -> None:
    if re.fullmatch(r"#[0-9A-Fa-f]{6}", color):
        assert Colors(background=color).background == color.upper()
        return
    with pytest.raises(ValidationError):
        Colors(background=color)


@SETTINGS
@given(key=st.text(max_size=70))
def test_invalid_field_keys_are_refused(key: str) -> None:
    if re.fullmatch(r"[A-Za-z][A-Za-z0-9_]{0,63}", key):
        assert DesignField(key=key, label="L", slot="back").key == key
        return
    with pytest.raises(ValidationError):
        DesignField(key=key, label="L", slot="back")


@SETTINGS
@given(data=designs(), path=st.sampled_from(["organization_name", "colors", "fields"]))
def test_arbitrary_values_raise_only_validation_errors(data: dict[str, Any], path: str) -> None:
    junks: list[Any] = [None, 3, [], {"x": 1}, "not-a-color"]
    for junk in junks:
        broken = {**data, path: junk}
        with contextlib.suppress(ValidationError):
            Design.model_validate(broken)
        with contextlib.suppress(ValidationError):
            Design.from_stored(broken)


@SETTINGS
@given(data=JSON_VALUES)
def test_arbitrary_json_raises_only_validation_errors(data: Any) -> None:
    for load in (Design.model_validate, Design.from_stored):
        with contextlib.suppress(ValidationError):
            load(data)


@pytest.mark.parametrize("value", ["#AABBCC\n", "seat\n"])
def test_trailing_newline_is_refused(value: str) -> None:
    color = value.startswith("#")
    data: dict[str, Any] = (
        {"background": value} if color else {"key": value, "label": "L", "slot": "back"}
    )
    model: type[Colors | DesignField] = Colors if color else DesignField
    with pytest.raises(ValidationError):
        model.model_validate(data)
