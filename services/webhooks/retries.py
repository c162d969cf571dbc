"""The retry schedule's arithmetic (spec 3.5, 8), kept pure so it is tested without a clock.

`delays[n]` is the wait before attempt n + 1: `delays[0]` from the delivery's creation (0 by
default: at once), every later one from the start of the previous attempt. The schedule's
length is the number of attempts; a failure of the last one makes the delivery `dead`.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta

from shared.models import DeliveryStatus


@dataclass(frozen=True)
class NextState:
    status: DeliveryStatus
    next_attempt_at: datetime | None
    # Not attempted: the endpoint is held back (its rate, a Retry-After) until next_attempt_at.
    held_back: bool = False
    # Attempted and answered with a Retry-After: nothing is sent to the endpoint before this.
    paused_until: datetime | None = None


def first_attempt_at(created_at: datetime, delays: list[float]) -> datetime:
    return created_at + timedelta(seconds=delays[0])


def after_attempt(
    attempts: int, delays: list[float], attempted_at: datetime, ok: bool
) -> NextState:
    """The state after attempt number `attempts` (1-based) started at `attempted_at`."""
    if ok:
        return NextState("delivered", None)
    if attempts >= len(delays):
        return NextState("dead", None)
    return NextState("failed", attempted_at + timedelta(seconds=delays[attempts]))
