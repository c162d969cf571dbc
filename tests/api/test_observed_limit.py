"""The cap on the events the public pages record per pass: 20 a minute per replica, each pass
on its own, counted again from the next minute; the passes it remembers are bounded."""

from datetime import UTC, datetime, timedelta

from services.api.observed_limit import PER_PASS_PER_MINUTE, ObservedEventLimit

START = datetime(2026, 11, 28, 12, 0, 0, tzinfo=UTC)


def test_a_pass_records_its_cap_a_minute_and_again_the_next_minute() -> None:
    limit = ObservedEventLimit()
    this_minute = [limit.allow("pass_a", START + timedelta(seconds=n)) for n in range(50)]
    assert this_minute == [True] * PER_PASS_PER_MINUTE + [False] * (50 - PER_PASS_PER_MINUTE)
    assert limit.allow("pass_b", START + timedelta(seconds=50))  # another pass is not held
    assert limit.allow("pass_a", START + timedelta(seconds=60))


def test_the_passes_it_remembers_are_bounded_the_least_recent_forgotten() -> None:
    limit = ObservedEventLimit(per_minute=1, max_passes=2)
    assert limit.allow("pass_a", START)
    assert limit.allow("pass_b", START)
    assert limit.allow("pass_c", START)  # pass_a forgotten
    assert not limit.allow("pass_c", START)
    assert limit.allow("pass_a", START)
