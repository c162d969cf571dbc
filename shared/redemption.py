"""Redemption policies: how often, and when, a template's passes may be scanned in.

A template stores its effective policy (the defaults filled in when it was written); a template
stored before policies existed has none and gets its type's defaults when read. The api
validates what a client sends (`RedemptionInput`, with dotted params); the issuer resolves it
against the template's type (`resolve_policy`). docs/redemption.md.
"""

from datetime import UTC, datetime
from typing import Any, Final, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    field_validator,
    model_validator,
)

from shared.dates import IsoDateTime
from shared.errors import InvalidRequest

OnLimit = Literal["mark_used", "keep"]
# Tickets and coupons are single-use unless the template says otherwise; the other types
# (memberships, loyalty cards, generic passes) are checked in without limit.
SINGLE_USE_TYPES: Final = frozenset({"event", "coupon"})
MAX_REDEMPTIONS_LIMIT: Final = 1_000_000


class RedemptionPolicy(BaseModel):
    """A template's effective policy, as stored and as the template object shows it."""

    model_config = ConfigDict(extra="ignore")

    max_redemptions: int | None = None
    valid_from: datetime | None = None
    valid_until: datetime | None = None
    on_limit: OnLimit = "mark_used"


class RedemptionInput(BaseModel):
    """`redemption` as a client sends it; absent keys take the defaults (`resolve_policy`)."""

    model_config = ConfigDict(extra="forbid")

    max_redemptions: StrictInt | None = Field(
        None,
        ge=1,
        le=MAX_REDEMPTIONS_LIMIT,
        description="Accepted scans per pass; null for unlimited. Default 1 for event and "
        "coupon templates, null for the others.",
    )
    valid_from: IsoDateTime | None = Field(None, description="ISO 8601 with an offset.")
    valid_until: IsoDateTime | None = Field(None, description="ISO 8601 with an offset.")
    on_limit: OnLimit = Field(
        "mark_used", description="What the last allowed scan does to the wallet copy."
    )

    @field_validator("valid_from", "valid_until")
    @classmethod
    def _storable(cls, value: datetime | None) -> datetime | None:
        # Stored as a UTC date: 9999-12-31T23:59-23:59 is past the last one Python can hold.
        if value is not None:
            try:
                value.astimezone(UTC)
            except OverflowError as exc:
                raise ValueError("is out of range once converted to UTC (years 1 to 9999)") from exc
        return value

    @model_validator(mode="after")
    def _ordered(self) -> "RedemptionInput":
        if (
            self.valid_from is not None
            and self.valid_until is not None
            and self.valid_from >= self.valid_until
        ):
            # Raised as the API error itself: a ValueError here could not name the field.
            raise InvalidRequest(
                "redemption.valid_until must be later than redemption.valid_from.",
                param="redemption.valid_until",
                code="parameter_invalid",
            )
        return self


def default_policy(template_type: str) -> RedemptionPolicy:
    return RedemptionPolicy(max_redemptions=1 if template_type in SINGLE_USE_TYPES else None)


def resolve_policy(template_type: str, sent: dict[str, Any] | None) -> RedemptionPolicy:
    """The effective policy of what a client sent (keys it left out take the defaults)."""
    policy = default_policy(template_type)
    if sent:
        policy = policy.model_copy(
            update=RedemptionPolicy.model_validate(sent).model_dump(include=set(sent))
        )
    return policy


def remaining(count: int, limit: int | None) -> int | None:
    """Redemptions left (None: unlimited)."""
    return None if limit is None else max(0, limit - count)
