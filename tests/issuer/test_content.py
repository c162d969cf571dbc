"""Tests for PassContent and the per-pass date overrides read from metadata."""

import datetime

import pytest

from services.issuer.content import (
    MetadataDateError,
    MetadataDates,
    metadata_dates,
    parse_aware_datetime,
)
from tests.issuer.pkpass_samples import content


def test_metadata_dates_are_read() -> None:
    dates = metadata_dates(
        {
            "expiration_date": "2031-12-31T23:59:00+01:00",
            "relevant_date": "2031-06-01T19:30:00Z",
            "other": "ignored",
        }
    )

    assert dates.expiration_date == datetime.datetime(
        2031, 12, 31, 23, 59, tzinfo=datetime.timezone(datetime.timedelta(hours=1))
    )
    assert dates.relevant_date == datetime.datetime(2031, 6, 1, 19, 30, tzinfo=datetime.UTC)


def test_missing_or_null_metadata_dates_mean_no_override() -> None:
    assert metadata_dates({}) == MetadataDates()
    assert metadata_dates({"expiration_date": None}) == MetadataDates()


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("2031-12-31", "needs a time zone"),
        ("2031-12-31T10:00:00", "needs a time zone"),
        ("next week", "is not an ISO 8601 date-time"),
        (1767225600, "must be an ISO 8601 date-time string"),
    ],
)
def test_invalid_metadata_dates(raw: object, reason: str) -> None:
    with pytest.raises(MetadataDateError, match=f"metadata.relevant_date {reason}") as caught:
        metadata_dates({"relevant_date": raw})
    assert caught.value.param == "metadata.relevant_date"

    assert metadata_dates({"relevant_date": raw}, strict=False) == MetadataDates()


@pytest.mark.parametrize("key", ["expiration_date", "relevant_date"])
def test_metadata_dates_with_seconds_in_the_offset_are_refused(key: str) -> None:
    # W3C dates (pass.json) allow only Z or +hh:mm; Python reads +05:30:15 as well.
    with pytest.raises(MetadataDateError, match="offset with seconds") as caught:
        metadata_dates({key: "2031-06-01T20:00:00+05:30:15"})
    assert caught.value.param == f"metadata.{key}"
    # `+05:30:00` is the same offset as `+05:30`: nothing is lost writing it.
    assert metadata_dates({key: "2031-06-01T20:00:00+05:30:00"}) != MetadataDates()


def test_a_stored_offset_with_seconds_is_kept_for_rendering() -> None:
    # A pass stored before such offsets were refused keeps its date; pass.json rounds it.
    dates = metadata_dates({"relevant_date": "2031-06-01T20:00:00+05:30:15"}, strict=False)

    assert dates.relevant_date is not None
    assert dates.relevant_date.utcoffset() == datetime.timedelta(hours=5, minutes=30, seconds=15)


def test_parse_aware_datetime_accepts_z_and_offsets() -> None:
    assert parse_aware_datetime("2031-01-02T03:04Z").utcoffset() == datetime.timedelta(0)
    assert parse_aware_datetime("2031-01-02T03:04:05.123-05:00").utcoffset() == datetime.timedelta(
        hours=-5
    )


def test_naive_override_dates_are_refused() -> None:
    with pytest.raises(ValueError, match="expiration_date must carry a time zone"):
        content(expiration_date=datetime.datetime(2031, 1, 1))
