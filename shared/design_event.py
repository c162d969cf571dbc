"""The design's `event` block: what an event ticket says about its event, to both wallets.

One block feeds Apple's semantic tags (pass.json `semantics`), the iOS 18 poster event ticket
(`preferredStyleSchemes`, its event guide links) and Google's EventTicketClass (`eventName`,
`dateTime`, `venue`) and EventTicketObject (`seatInfo`). The mapping is tabled in
docs/templates.md#event and docs/google-wallet.md. Kept apart from design.py, which only plugs
it in (`Design.event`) and calls `style_problem` from `check_style`.
"""

from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    EmailStr,
    Field,
    HttpUrl,
    StrictBool,
    StrictFloat,
    StringConstraints,
    TypeAdapter,
    ValidationInfo,
    field_validator,
    model_validator,
)

from shared.dates import IsoDateTime, offset_problem
from shared.design_images import is_stored
from shared.urls import url_characters_problem

EventType = Literal[
    "generic",
    "live_performance",
    "movie",
    "sports",
    "conference",
    "convention",
    "workshop",
    "social_gathering",
]
# Apple's PKEventType values, by our name.
APPLE_EVENT_TYPES: dict[str, str] = {
    "generic": "PKEventTypeGeneric",
    "live_performance": "PKEventTypeLivePerformance",
    "movie": "PKEventTypeMovie",
    "sports": "PKEventTypeSports",
    "conference": "PKEventTypeConference",
    "convention": "PKEventTypeConvention",
    "workshop": "PKEventTypeWorkshop",
    "social_gathering": "PKEventTypeSocialGathering",
}
# `links` key -> the pass.json key of the button Wallet shows in a poster ticket's event guide.
APPLE_LINK_KEYS: dict[str, str] = {
    "accessibility": "accessibilityURL",
    "add_on": "addOnURL",
    "bag_policy": "bagPolicyURL",
    "directions": "directionsInformationURL",
    "merchandise": "merchandiseURL",
    "order_food": "orderFoodURL",
    "parking_information": "parkingInformationURL",
    "purchase_parking": "purchaseParkingURL",
    "sell": "sellURL",
    "transfer": "transferURL",
    "transit_information": "transitInformationURL",
}
SEAT_PARTS = ("section", "row", "number", "gate")
POSTER_STYLE_SCHEMES = ("posterEventTicket", "eventTicket")
MAX_PERFORMERS = 20

Text = Annotated[str, StringConstraints(min_length=1, max_length=200)]
_HTTP_URL: TypeAdapter[HttpUrl] = TypeAdapter(HttpUrl)


def _http_url(value: str, info: ValidationInfo) -> str:
    """Check `value` is an absolute http(s) URL; it is kept as sent (HttpUrl would rewrite it,
    e.g. add a trailing slash), since it goes into pass.json unchanged. So it must be plain
    ASCII, as a URL on the wire is: control and invisible characters (a right-to-left override
    that disguises the link) are refused, and so is non-ASCII text, which the sender encodes
    (a design saved before 2026-11-28 loads as it is)."""
    _HTTP_URL.validate_python(value)
    if any(char.isspace() for char in value):
        raise ValueError("a URL cannot contain whitespace")
    if is_stored(info):
        return value
    if (problem := url_characters_problem(value)) is not None:
        raise ValueError(f"a URL {problem}")
    if not value.isascii():
        raise ValueError(
            "a URL must be ASCII: percent-encode other characters of its path and query, and "
            "write an international domain name in its xn-- form"
        )
    return value


Url = Annotated[str, StringConstraints(min_length=1, max_length=2000), AfterValidator(_http_url)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Venue(_Strict):
    name: Text = Field(description="The venue's name.")
    address: str = Field(
        min_length=1, max_length=500, description="Lines separated by \\n (Google shows it)."
    )
    region: Text | None = Field(default=None, description="e.g. `Venice, Italy`.")
    room: Text | None = Field(default=None, description="e.g. `Main Stage`.")
    latitude: StrictFloat | None = Field(
        default=None, ge=-90, le=90, description="Degrees; with `longitude`."
    )
    longitude: StrictFloat | None = Field(
        default=None, ge=-180, le=180, description="Degrees; with `latitude`."
    )
    phone_number: str | None = Field(
        default=None, min_length=1, max_length=50, description="The venue's phone number."
    )
    email: EmailStr | None = Field(None, description="The venue's email address.")
    website: Url | None = Field(None, description="The venue's website, an absolute http(s) URL.")

    @model_validator(mode="after")
    def _both_coordinates(self) -> "Venue":
        if (self.latitude is None) != (self.longitude is None):
            raise ValueError("give latitude and longitude together")
        return self


class Team(_Strict):
    name: Text | None = Field(None, description="The team's name.")
    abbreviation: str | None = Field(
        default=None, min_length=1, max_length=10, description="A short form, up to 10 characters."
    )
    location: Text | None = Field(None, description="Where the team is from.")


class SeatFields(_Strict):
    """Which design fields hold the seat: each pass's values for them become its seat."""

    section: str | None = Field(
        default=None, max_length=64, description="Key of the design field holding the section."
    )
    row: str | None = Field(
        default=None, max_length=64, description="Key of the design field holding the row."
    )
    number: str | None = Field(
        default=None, max_length=64, description="Key of the design field holding the seat number."
    )
    gate: str | None = Field(
        default=None, max_length=64, description="Key of the design field holding the gate."
    )


class EventLinks(_Strict):
    """Buttons of a poster ticket's event guide (Apple shows them only on poster tickets)."""

    accessibility: Url | None = Field(None, description="Accessibility information.")
    add_on: Url | None = Field(None, description="Add-ons for the event.")
    bag_policy: Url | None = Field(None, description="The venue's bag policy.")
    directions: Url | None = Field(None, description="Directions to the venue.")
    merchandise: Url | None = Field(None, description="Merchandise.")
    order_food: Url | None = Field(None, description="Ordering food.")
    parking_information: Url | None = Field(None, description="Parking information.")
    purchase_parking: Url | None = Field(None, description="Buying parking.")
    sell: Url | None = Field(None, description="Selling the ticket.")
    transfer: Url | None = Field(None, description="Transferring the ticket.")
    transit_information: Url | None = Field(None, description="Public transport.")

    def given(self) -> dict[str, str]:
        """The links that are set, by `links` key."""
        return {key: url for key in APPLE_LINK_KEYS if (url := getattr(self, key)) is not None}


class Event(_Strict):
    name: Text = Field(description="The event's name.")
    type: EventType | None = Field(
        None,
        description="`generic`, `live_performance`, `movie`, `sports`, `conference`, "
        "`convention`, `workshop` or `social_gathering`.",
    )
    starts_at: IsoDateTime = Field(
        description="When it starts: ISO 8601 date-time with a time zone (`Z` or `+hh:mm`)."
    )
    ends_at: IsoDateTime | None = Field(None, description="When it ends, after it starts.")
    doors_open_at: IsoDateTime | None = Field(
        None, description="When the doors open, not after it starts."
    )
    venue: Venue | None = Field(None, description="Where it takes place.")
    performers: list[Text] = Field(
        default_factory=list, max_length=MAX_PERFORMERS, description="Up to 20 performers' names."
    )
    home_team: Team | None = Field(None, description="A sports event's home team.")
    away_team: Team | None = Field(None, description="A sports event's away team.")
    seat_fields: SeatFields | None = Field(None, description="Which design fields hold the seat.")
    poster: StrictBool = Field(
        default=False, description="iOS 18 poster event ticket; older iOS shows the classic one."
    )
    logo_text: Text | None = Field(default=None, description="Beside the poster ticket's logo.")
    links: EventLinks = Field(
        default_factory=EventLinks,
        description="Links Apple Wallet shows in a poster ticket's event guide.",
    )

    @field_validator("starts_at", "ends_at", "doors_open_at")
    @classmethod
    def _w3c(cls, value: AwareDatetime | None, info: ValidationInfo) -> AwareDatetime | None:
        """As the design's other dates (design._w3c): W3C has no offset with seconds."""
        if value is not None and not is_stored(info) and (problem := offset_problem(value)):
            raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _ordered(self) -> "Event":
        if self.ends_at is not None and self.ends_at <= self.starts_at:
            raise ValueError("ends_at must be after starts_at")
        if self.doors_open_at is not None and self.doors_open_at > self.starts_at:
            raise ValueError("doors_open_at cannot be after starts_at")
        return self

    def style_problem(
        self,
        *,
        apple_style: str,
        template_type: str | None,
        field_keys: set[str],
        has_barcode: bool,
    ) -> tuple[str, str] | None:
        """(param under `design`, message) of what this block cannot be for the template, or
        None. A poster must carry what Apple requires of one, or Wallet silently shows the
        classic ticket: the tags every event needs (name, venue name, region and room), those
        of its type, and a barcode (Tessera writes no NFC entry credential)."""
        if apple_style != "eventTicket" or template_type not in (None, "event"):
            return (
                "event",
                "design.event is only for templates of type event with apple_style eventTicket.",
            )
        for part in SEAT_PARTS:
            key = getattr(self.seat_fields, part, None)
            if key is not None and key not in field_keys:
                return (
                    f"event.seat_fields.{part}",
                    f"seat_fields.{part} names {key!r}, which is not a field of the design.",
                )
        if not self.poster:
            return None
        return self._poster_problem(has_barcode)

    def _poster_problem(self, has_barcode: bool) -> tuple[str, str] | None:
        needs = "A poster event ticket needs"
        if self.venue is None:
            return "event.venue", f"{needs} event.venue (name, address, region and room)."
        for part in ("region", "room"):
            if getattr(self.venue, part) is None:
                return f"event.venue.{part}", f"{needs} event.venue.{part}."
        if self.type == "live_performance" and not self.performers:
            return "event.performers", f"{needs} performers for a live_performance."
        if self.type == "sports":
            for side in ("home_team", "away_team"):
                team: Team | None = getattr(self, side)
                if team is None or team.abbreviation is None:
                    return f"event.{side}", f"{needs} {side}.abbreviation for sports."
        if not has_barcode:
            return "event.poster", f"{needs} a barcode: Wallet admits a poster only with one."
        return None


def seat_values(
    event: Event, field_values: dict[str, str], defaults: dict[str, str]
) -> dict[str, str]:
    """The pass's seat, by part (section, row, number, gate): the value of the field each part
    names, or that field's default; a part without either is left out."""
    found: dict[str, str] = {}
    for part in SEAT_PARTS:
        key = getattr(event.seat_fields, part, None)
        if key is not None and (value := field_values.get(key) or defaults.get(key)):
            found[part] = value
    return found
