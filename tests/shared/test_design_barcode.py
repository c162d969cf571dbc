"""Barcode message placeholders: an unknown one is refused, naming it and the valid ones."""

import pytest
from pydantic import ValidationError

from shared.design import Barcode
from shared.design_images import STORED


@pytest.mark.parametrize(
    "message",
    [
        "{serial_number}",
        "T-{short_id}-{field_values.seat}",
        '{"ticket": 1}',
        "{ }",
        "no placeholder",
    ],
)
def test_known_placeholders_and_other_braces_are_accepted(message: str) -> None:
    assert Barcode(message=message).message == message


@pytest.mark.parametrize("placeholder", ["{serail_number}", "{field_values.}", "{shortid}"])
def test_an_unknown_placeholder_is_refused_with_the_valid_ones(placeholder: str) -> None:
    with pytest.raises(ValidationError) as refused:
        Barcode(message=f"A-{placeholder}")
    message = str(refused.value.errors()[0]["msg"])
    assert placeholder in message
    for valid in ("{serial_number}", "{short_id}", "{field_values.<key>}"):
        assert valid in message


def test_a_stored_design_loads_as_it_was() -> None:
    stored = Barcode.model_validate({"message": "{serail_number}"}, context=STORED)
    assert stored.message == "{serail_number}"
