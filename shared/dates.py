"""Dates as pass.json carries them: the W3C profile of ISO 8601 (docs/templates.md).

Shared because the design (shared/design.py, checked by the api and by the issuer) and the
issuer's per-pass dates follow one rule: a date names its time zone, and the offset is whole
minutes (`Z` or `+hh:mm`). Python reads `+05:30:15` as an offset too, but a W3C date cannot
say it, and Apple Wallet, passkit-generator and pass-js all refuse a pass that does.
"""

import datetime
import re
from typing import Annotated

from pydantic import AwareDatetime, BeforeValidator

_MINUTE = datetime.timedelta(minutes=1)
# Text pydantic would read as seconds since 1970.
_NUMBER = re.compile(r"\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*\Z")
_MAX_OFFSET_MINUTES = 23 * 60 + 59


def parse_aware_datetime(raw: object) -> datetime.datetime:
    """Parse an ISO 8601 date-time string that names its time zone (`Z` or `+02:00`).

    Any offset Python reads is accepted here; `offset_problem` says whether W3C can write it.
    """
    if not isinstance(raw, str):
        raise ValueError("must be an ISO 8601 date-time string")
    try:
        value = datetime.datetime.fromisoformat(raw)
    except ValueError as exc:
        raise ValueError(f"is not an ISO 8601 date-time: {raw!r}") from exc
    if value.utcoffset() is None:
        raise ValueError(f"needs a time zone (Z or +hh:mm): {raw!r}")
    return value


def offset_problem(value: datetime.datetime) -> str | None:
    """Why `value` cannot be written as a W3C date (no time zone, an offset with seconds)."""
    offset = value.utcoffset()
    if offset is None:
        return "needs a time zone (Z or +hh:mm)"
    if offset % _MINUTE:
        return "has a UTC offset with seconds; a W3C date allows only Z or +hh:mm / -hh:mm"
    return None


def date_text_problem(text: str) -> str | None:
    """What is wrong with the value of a date field (`date_style` / `time_style`), or None.

    Text that is not a date with a time zone is fine: pass.json shows it as plain text. A date
    is fine when W3C can write it.
    """
    try:
        moment = parse_aware_datetime(text)
    except ValueError:
        return None
    return offset_problem(moment)


def parse_w3c_datetime(raw: object) -> datetime.datetime:
    """`parse_aware_datetime`, refusing an offset that a W3C date cannot write."""
    value = parse_aware_datetime(raw)
    problem = offset_problem(value)
    if problem is not None:
        raise ValueError(f"{problem}: {raw!r}")
    return value


def w3c_date(value: datetime.datetime) -> str:
    """`value` as pass.json writes it: `2031-06-01T20:00:00+02:00`, to the second.

    An offset with seconds (a value stored before they were refused) is rounded to the nearest
    minute with the local time kept: Wallet shows that time as written when a field ignores
    the time zone, and the instant moves by under 30 seconds, below what Wallet displays.
    """
    offset = value.utcoffset()
    if offset is None:
        raise ValueError("a pass.json date needs a time zone")
    if offset % _MINUTE:
        minutes = round(offset / _MINUTE)
        minutes = max(-_MAX_OFFSET_MINUTES, min(_MAX_OFFSET_MINUTES, minutes))
        value = value.replace(tzinfo=datetime.timezone(datetime.timedelta(minutes=minutes)))
    return value.isoformat(timespec="seconds")


def _written_as_text(value: object) -> object:
    """A date-time arrives as ISO 8601 text (or as a datetime, read back from the store): a
    number, a boolean or numeric text is refused, where pydantic's lax mode read 0 and "0"
    as 1970-01-01 and stored it."""
    if isinstance(value, datetime.datetime):
        return value
    if isinstance(value, str) and not _NUMBER.match(value):
        return value  # pydantic reads it, or says why not
    raise ValueError("must be an ISO 8601 date-time string with a time zone (Z or +hh:mm)")


# An aware date-time a client must write as text.
IsoDateTime = Annotated[AwareDatetime, BeforeValidator(_written_as_text)]
