"""services/api/pages/dates.py: a date field's value as the landing page shows it."""

import pytest

from services.api.pages.dates import format_date_value

MOMENT = "2031-10-08T20:00:00+02:00"


@pytest.mark.parametrize(
    ("date_style", "time_style", "shown"),
    [
        ("short", None, "8 Oct 2031"),
        ("medium", "short", "Wed 8 Oct 2031, 20:00"),
        ("long", "medium", "8 October 2031, 20:00"),
        ("full", "long", "Wednesday 8 October 2031, 20:00 UTC+02:00"),
        ("none", "short", "20:00"),
        (None, "full", "20:00 UTC+02:00"),
    ],
)
def test_styles_give_a_readable_date_in_the_values_own_offset(
    date_style: str | None, time_style: str | None, shown: str
) -> None:
    assert format_date_value(MOMENT, date_style, time_style) == shown


def test_utc_and_negative_offsets_are_named() -> None:
    assert format_date_value("2031-01-02T03:04:00Z", None, "long") == "03:04 UTC"
    assert format_date_value("2031-01-02T03:04:00-05:30", None, "full") == "03:04 UTC-05:30"


def test_text_that_is_not_a_dated_moment_is_shown_as_given() -> None:
    # As pass.json does: a date field may hold plain text ("TBA"), or a date without a zone.
    assert format_date_value("TBA", "short", "short") == "TBA"
    assert format_date_value("2031-10-08T20:00:00", "short", None) == "2031-10-08T20:00:00"
    assert format_date_value(MOMENT, "none", "none") == MOMENT
