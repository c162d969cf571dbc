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
    return (
        moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
    )
