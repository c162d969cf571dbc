"""What one pass's .pkpass is made from: the template design plus the pass's own values.

Dates in a pass's metadata override the design's (docs/templates.md), so one template serves
passes for different days.
"""

import datetime
from dataclasses import dataclass

from shared.dates import parse_aware_datetime
from shared.design import Design
from shared.pass_values import (
    METADATA_DATE_KEYS,
    MetadataDateError,
    MetadataDates,
    metadata_dates,
)

__all__ = [
    "APPLE_STYLES",
    "METADATA_DATE_KEYS",
    "MIN_AUTH_TOKEN_LENGTH",
    "MetadataDateError",
    "MetadataDates",
    "PassContent",
    "metadata_dates",
    "parse_aware_datetime",
]

APPLE_STYLES = ("eventTicket", "generic", "storeCard", "coupon", "boardingPass")
MIN_AUTH_TOKEN_LENGTH = 16  # Apple rejects shorter authentication tokens.


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
        if self.holder_name is not None and not self.holder_name.strip():
            # An empty name is no name, as on the landing page and at Google: no blank "Name"
            # field taking a secondary slot, no empty attendeeName.
            object.__setattr__(self, "holder_name", None)
        for name in METADATA_DATE_KEYS:
            value = getattr(self, name)
            if value is not None and value.utcoffset() is None:
                raise ValueError(f"{name} must carry a time zone")
