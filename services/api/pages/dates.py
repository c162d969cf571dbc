"""A date field's value as the landing page shows it: readable, per its date_style/time_style.

Wallet formats a date field in the phone's locale and time zone; a web page knows neither, so
the preview uses one fixed English form in the offset the value was given in (the event's
local time, which is what a holder reads on a ticket): "Wed 8 Oct 2031, 20:00". A style of
"none" leaves that part out; long and full times name the offset. A value that is not a date
with a time zone is shown as given, as pass.json does (shared/dates.py).
"""

from datetime import datetime

from shared.dates import parse_aware_datetime

_DATE_FORMATS = {
    "short": "{d} {b} {Y}",
    "medium": "{a} {d} {b} {Y}",
    "long": "{d} {B} {Y}",
    "full": "{A} {d} {B} {Y}",
}
_MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
_WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


def format_date_value(value: str, date_style: str | None, time_style: str | None) -> str:
    try:
        moment = parse_aware_datetime(value)
    except ValueError:
        return value
    parts = []
    if date_style is not None and date_style != "none":
        parts.append(_date(moment, date_style))
    if time_style is not None and time_style != "none":
        parts.append(_time(moment, time_style))
    return ", ".join(parts) if parts else value


def _date(moment: datetime, style: str) -> str:
    month = _MONTHS[moment.month - 1]
    return _DATE_FORMATS.get(style, _DATE_FORMATS["medium"]).format(
        d=moment.day,
        b=month[:3],
        B=month,
        Y=moment.year,
        a=_WEEKDAYS[moment.weekday()][:3],
        A=_WEEKDAYS[moment.weekday()],
    )


def _time(moment: datetime, style: str) -> str:
    text = f"{moment.hour:02d}:{moment.minute:02d}"
    if style in ("long", "full"):
        text += f" {_offset(moment)}"
    return text


def _offset(moment: datetime) -> str:
    offset = moment.utcoffset()
    minutes = int(offset.total_seconds() // 60) if offset is not None else 0
    if minutes == 0:
        return "UTC"
    sign = "+" if minutes > 0 else "-"
    hours, rest = divmod(abs(minutes), 60)
    return f"UTC{sign}{hours:02d}:{rest:02d}"
