"""Tests for the W3C date rules pass.json follows (shared/dates.py)."""

import datetime

import pytest

from shared.dates import (
    date_text_problem,
    offset_problem,
    parse_aware_datetime,
    parse_w3c_datetime,
    w3c_date,
)


def _zone(**offset: int) -> datetime.timezone:
    return datetime.timezone(datetime.timedelta(**offset))


@pytest.mark.parametrize(
    ("raw", "written"),
    [
        ("2031-06-01T20:00Z", "2031-06-01T20:00:00+00:00"),
        ("2031-06-01T20:00:00.123456+05:45", "2031-06-01T20:00:00+05:45"),
        ("2031-06-01T20:00:00-03:30", "2031-06-01T20:00:00-03:30"),
        ("2031-06-01T20:00:00+05:30:00", "2031-06-01T20:00:00+05:30"),
        ("20310601T2000+0200", "2031-06-01T20:00:00+02:00"),  # ISO 8601's basic format
    ],
)
def test_w3c_dates_are_read_and_written(raw: str, written: str) -> None:
    assert w3c_date(parse_w3c_datetime(raw)) == written


@pytest.mark.parametrize(
    ("offset", "written"),
    [
        (_zone(hours=5, minutes=30, seconds=15), "2031-06-01T20:00:00+05:30"),
        (_zone(hours=5, minutes=30, seconds=45), "2031-06-01T20:00:00+05:31"),
        (_zone(hours=-4, minutes=-56, seconds=-2), "2031-06-01T20:00:00-04:56"),
        (_zone(hours=23, minutes=59, seconds=45), "2031-06-01T20:00:00+23:59"),
        (_zone(hours=-23, minutes=-59, seconds=-59), "2031-06-01T20:00:00-23:59"),
    ],
)
def test_an_offset_with_seconds_is_rounded_keeping_the_local_time(
    offset: datetime.timezone, written: str
) -> None:
    assert w3c_date(datetime.datetime(2031, 6, 1, 20, 0, tzinfo=offset)) == written


def test_offsets_with_seconds_are_refused_on_input() -> None:
    with pytest.raises(ValueError, match="offset with seconds"):
        parse_w3c_datetime("2031-06-01T20:00:00+05:30:15")
    # Read, though, so that a stored value can be rendered.
    assert parse_aware_datetime("2031-06-01T20:00:00+05:30:15").utcoffset() == datetime.timedelta(
        hours=5, minutes=30, seconds=15
    )
    assert offset_problem(datetime.datetime(2031, 1, 1)) == "needs a time zone (Z or +hh:mm)"
    with pytest.raises(ValueError, match="needs a time zone"):
        w3c_date(datetime.datetime(2031, 1, 1))


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("To be announced", None),  # shown as text
        ("2031-06-01T20:00:00", None),  # no time zone: shown as text
        ("2031-06-01T20:00:00+02:00", None),
        ("2031-06-01T20:00:00+05:30:15", "offset with seconds"),
    ],
)
def test_date_text_problem(text: str, problem: str | None) -> None:
    found = date_text_problem(text)
    assert (found is None) if problem is None else (found is not None and problem in found)
