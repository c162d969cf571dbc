"""The Last-Modified of a stored pass file: whole seconds, strictly later for every version."""

from datetime import UTC, datetime

from services.issuer.repository import last_modified_after


def test_last_modified_rounds_up_to_the_second() -> None:
    moment = datetime(2031, 1, 2, 3, 4, 5, 1000, tzinfo=UTC)
    assert last_modified_after(moment, None) == datetime(2031, 1, 2, 3, 4, 6, tzinfo=UTC)
    whole = datetime(2031, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert last_modified_after(whole, None) == whole


def test_versions_within_one_second_still_get_later_stamps() -> None:
    first = last_modified_after(datetime(2031, 1, 2, 3, 4, 5, 100_000, tzinfo=UTC), None)
    second = last_modified_after(datetime(2031, 1, 2, 3, 4, 5, 900_000, tzinfo=UTC), first)
    third = last_modified_after(datetime(2031, 1, 2, 3, 4, 5, 950_000, tzinfo=UTC), second)
    assert [first.second, second.second, third.second] == [6, 7, 8]
    later = last_modified_after(datetime(2031, 1, 2, 3, 5, 0, tzinfo=UTC), third)
    assert later == datetime(2031, 1, 2, 3, 5, 0, tzinfo=UTC)
