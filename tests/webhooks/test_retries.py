"""The retry schedule's arithmetic: delays from the previous attempt, dead after the last."""

from datetime import UTC, datetime, timedelta

import pytest

from services.webhooks.config import DEFAULT_RETRY_SCHEDULE_SECONDS
from services.webhooks.retries import NextState, after_attempt, first_attempt_at

T0 = datetime(2025, 1, 1, tzinfo=UTC)
DELAYS = list(DEFAULT_RETRY_SCHEDULE_SECONDS)


def test_the_default_schedule_is_the_spec_one() -> None:
    assert DELAYS == [0, 30, 300, 1800, 7200, 43200, 86400]


def test_the_first_attempt_is_due_at_creation() -> None:
    assert first_attempt_at(T0, DELAYS) == T0
    assert first_attempt_at(T0, [5.0, 1.0]) == T0 + timedelta(seconds=5)


@pytest.mark.parametrize("attempts", range(1, 8))
def test_a_success_is_delivered_whatever_the_attempt(attempts: int) -> None:
    assert after_attempt(attempts, DELAYS, T0, ok=True) == NextState("delivered", None)


def test_each_failure_waits_the_next_delay_from_that_attempt() -> None:
    expected = [30, 300, 1800, 7200, 43200, 86400]
    for attempts, delay in enumerate(expected, start=1):
        state = after_attempt(attempts, DELAYS, T0, ok=False)
        assert state == NextState("failed", T0 + timedelta(seconds=delay))


def test_the_seventh_failure_is_dead_with_no_next_attempt() -> None:
    assert after_attempt(7, DELAYS, T0, ok=False) == NextState("dead", None)


def test_a_one_attempt_schedule_dies_at_once() -> None:
    assert after_attempt(1, [0.0], T0, ok=False) == NextState("dead", None)


def test_a_whole_schedule_of_failures_spans_the_sum_of_its_delays() -> None:
    at, attempts = first_attempt_at(T0, DELAYS), 0
    while True:
        attempts += 1
        state = after_attempt(attempts, DELAYS, at, ok=False)
        if state.next_attempt_at is None:
            break
        at = state.next_attempt_at
    assert (attempts, state.status) == (7, "dead")
    assert at - T0 == timedelta(seconds=sum(DELAYS))
