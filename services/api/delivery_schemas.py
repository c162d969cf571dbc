"""What the api receives about a webhook's deliveries: the body of POST
/v1/webhooks/{id}/recover and the filters of GET /v1/webhooks/{id}/deliveries
(docs/webhooks.md#resend-and-recover). Bad input is a 400 naming its `param`."""

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated

from fastapi import Query
from pydantic import (
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from services.api.schemas import WEBHOOK_TYPES, StorableBody
from shared.dates import IsoDateTime
from shared.errors import InvalidRequest
from shared.models import DeliveryStatus

# A delivery carries one webhook event type; "*" is only a subscription's wildcard.
DELIVERY_EVENT_TYPES = sorted(WEBHOOK_TYPES - {"*"})


def _in_utc(value: datetime | None, info: ValidationInfo) -> datetime | None:
    """The moment in UTC, as it is stored; a moment UTC cannot hold (year 1 with an offset
    east of Greenwich, year 9999 west of it) is refused here rather than failing later."""
    if value is None:
        return None
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise InvalidRequest(
            f"Invalid {info.field_name}: out of range once in UTC.",
            param=info.field_name,
            code="parameter_invalid",
        ) from None


class RecoverBody(StorableBody):
    model_config = ConfigDict(extra="forbid")

    # IsoDateTime: text only, and not numeric text, which pydantic read as Unix seconds
    # ("20240501", a date without its dashes, re-queued everything since 1970).
    since: IsoDateTime = Field(
        description="Re-queue deliveries created at or after this time (ISO 8601 with an offset)."
    )
    until: IsoDateTime | None = Field(
        None, description="... and before this time (ISO 8601 with an offset); null for now."
    )

    _utc = field_validator("since", "until")(_in_utc)

    @model_validator(mode="after")
    def _ordered(self) -> "RecoverBody":
        if self.until is not None and self.until < self.since:
            # Raised as the API error itself: a ValueError here could not name the field.
            raise InvalidRequest(
                "until must not be earlier than since.", param="until", code="parameter_invalid"
            )
        return self


@dataclass(frozen=True)
class DeliveryFilters:
    status: DeliveryStatus | None = None
    event_type: str | None = None


async def delivery_filters(
    status: Annotated[
        DeliveryStatus | None, Query(description="Only deliveries in this status.")
    ] = None,
    event_type: Annotated[
        str | None, Query(description="Only deliveries of this webhook event type.")
    ] = None,
) -> DeliveryFilters:
    """The listing's filters (a dependency): a status of the four, a known event type."""
    if event_type is not None and event_type not in DELIVERY_EVENT_TYPES:
        raise InvalidRequest(
            f"Invalid event_type: use one of {DELIVERY_EVENT_TYPES}.",
            param="event_type",
            code="parameter_invalid",
        )
    return DeliveryFilters(status=status, event_type=event_type)
