"""What one pass's .pkpass is made from: the template design plus the pass's own values.

Dates in a pass's metadata override the design's (docs/templates.md), so one template serves
passes for different days.
"""

import datetime
from collections.abc import Mapping
from dataclasses import dataclass

from shared.design import Design

APPLE_STYLES = ("eventTicket", "generic", "storeCard", "coupon", "boardingPass")
MIN_AUTH_TOKEN_LENGTH = 16  # Apple rejects shorter authentication tokens.
METADATA_DATE_KEYS = ("expiration_date", "relevant_date")


@dataclass(frozen=True)
class PassContent:
    apple_style: str  # one of APPLE_STYLES
    design: Design  # shared.design.Design
    serial_number: str
    short_id: str
    field_values: dict[str, str]
    holder_name: str | None
    authentication_token: str  # >= 16 chars
    web_service_url: str | None
    voided: bool
    # Per-pass overrides of the design's dates (from metadata; see `metadata_dates`).
    expiration_date: datetime.datetime | None = None
    relevant_date: datetime.datetime | None = None

    def __post_init__(self) -> None:
        if self.apple_style not in APPLE_STYLES:
            raise ValueError(f"apple_style must be one of {APPLE_STYLES}, got {self.apple_style!r}")
        if not self.serial_number:
            raise ValueError("serial_number must be non-empty")
        if len(self.authentication_token) < MIN_AUTH_TOKEN_LENGTH:
            raise ValueError(
                f"authentication_token must be at least {MIN_AUTH_TOKEN_LENGTH} characters"
            )
        for name in METADATA_DATE_KEYS:
            value = getattr(self, name)
            if value is not None and value.utcoffset() is None:
                raise ValueError(f"{name} must carry a time zone")


class MetadataDateError(ValueError):
    """An invalid per-pass date in metadata; `param` is e.g. "metadata.relevant_date"."""

    def __init__(self, param: str, message: str):
        super().__init__(f"{param} {message}")
        self.param = param


@dataclass(frozen=True)
class MetadataDates:
    expiration_date: datetime.datetime | None = None
    relevant_date: datetime.datetime | None = None


def metadata_dates(metadata: Mapping[str, object], *, strict: bool = True) -> MetadataDates:
    """The per-pass date overrides found in a pass's metadata.

    With `strict`, a present but invalid value raises MetadataDateError (`param` is
    `metadata.<key>`); without it, invalid values are ignored (the design's date applies).
    """
    found: dict[str, datetime.datetime] = {}
    for key in METADATA_DATE_KEYS:
        raw = metadata.get(key)
        if raw is None:
            continue
        try:
            found[key] = parse_aware_datetime(raw)
        except ValueError as exc:
            if strict:
                raise MetadataDateError(f"metadata.{key}", str(exc)) from exc
    return MetadataDates(**found)


def parse_aware_datetime(raw: object) -> datetime.datetime:
    """Parse an ISO 8601 date-time string that names its time zone (`Z` or `+02:00`)."""
    if not isinstance(raw, str):
        raise ValueError("must be an ISO 8601 date-time string")
    try:
        value = datetime.datetime.fromisoformat(raw)
    except ValueError as exc:
        raise ValueError(f"is not an ISO 8601 date-time: {raw!r}") from exc
    if value.utcoffset() is None:
        raise ValueError(f"needs a time zone (Z or +hh:mm): {raw!r}")
    return value
