"""Timestamps as the API writes them (shared/clock.py `iso`)."""

from datetime import UTC, datetime, timedelta, timezone

import pytest

from shared.clock import iso


@pytest.mark.parametrize(
    ("moment", "written"),
    [
        (datetime(2026, 11, 29, 8, 5, 3, 123_999, tzinfo=UTC), "2026-11-29T08:05:03.123Z"),
        # Years before 1000 keep four digits (glibc's %Y wrote "1-01-01T...").
        (datetime(1, 1, 1, tzinfo=UTC), "0001-01-01T00:00:00.000Z"),
        (datetime(999, 12, 31, 23, 59, 59, tzinfo=UTC), "0999-12-31T23:59:59.000Z"),
        # Another offset: the same instant in UTC.
        (
            datetime(2026, 1, 1, 1, 0, tzinfo=timezone(timedelta(hours=2))),
            "2025-12-31T23:00:00.000Z",
        ),
    ],
)
def test_iso_is_utc_with_milliseconds_and_four_digit_years(moment: datetime, written: str) -> None:
    assert iso(moment) == written
