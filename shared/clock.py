"""The clock services read. Injectable so tests can move time without sleeping."""

from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime: ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


def iso(moment: datetime) -> str:
    """ISO 8601 in UTC with milliseconds and a Z, the form every timestamp in the API uses."""
    utc = moment.astimezone(UTC)
    # Not strftime's %Y: glibc leaves years before 1000 unpadded ("1-01-01T...").
    return f"{utc.year:04d}-{utc:%m-%dT%H:%M:%S}.{utc.microsecond // 1000:03d}Z"
