"""Render pass.json (Apple's `Pass` dictionary) from a template design and one pass.

Every field of an updatable pass (one with a webServiceURL) carries a changeMessage, the
design's own or `DEFAULT_CHANGE_MESSAGE`, so a holder is notified when an update changes it.
"""

import decimal
import re
from typing import Any

from services.issuer.content import PassContent
from shared.apple_identity import SigningIdentity
from shared.dates import parse_aware_datetime, w3c_date
from shared.design import BARCODE_PLACEHOLDER, Barcode, DesignField
from shared.design_event import (
    APPLE_EVENT_TYPES,
    APPLE_LINK_KEYS,
    POSTER_STYLE_SCHEMES,
    Event,
    Team,
    seat_values,
)

_SLOT_KEYS = (
    ("header", "headerFields"),
    ("primary", "primaryFields"),
    ("secondary", "secondaryFields"),
    ("auxiliary", "auxiliaryFields"),
    ("back", "backFields"),
)
_BARCODE_FORMATS = {
    "qr": "PKBarcodeFormatQR",
    "pdf417": "PKBarcodeFormatPDF417",
    "aztec": "PKBarcodeFormatAztec",
    "code128": "PKBarcodeFormatCode128",
}
# iOS before 9 reads only the singular `barcode` key, and cannot show Code 128.
_LEGACY_BARCODE_FORMATS = frozenset({"qr", "pdf417", "aztec"})
_SECONDARY_LIMIT = 4
DEFAULT_CHANGE_MESSAGE = "Changed to %@"
_MAX_DIGITS = 15  # a number's magnitude Wallet shows faithfully: 10^-15 to 10^15
_ALIGNMENTS = {
    "left": "PKTextAlignmentLeft",
    "center": "PKTextAlignmentCenter",
    "right": "PKTextAlignmentRight",
    "natural": "PKTextAlignmentNatural",
}
_NUMBER_STYLES = {
    "decimal": "PKNumberStyleDecimal",
    "percent": "PKNumberStylePercent",
    "scientific": "PKNumberStyleScientific",
    "spell_out": "PKNumberStyleSpellOut",
}
# Seat part (shared/design_event.SEAT_PARTS) -> key of Apple's SemanticTagType.Seat.
_SEAT_KEYS = {"section": "seatSection", "row": "seatRow", "number": "seatNumber"}
_DETECTORS = {
    "phone_number": "PKDataDetectorTypePhoneNumber",
    "link": "PKDataDetectorTypeLink",
    "address": "PKDataDetectorTypeAddress",
    "calendar_event": "PKDataDetectorTypeCalendarEvent",
}


def render_pass_json(content: PassContent, identity: SigningIdentity) -> dict[str, Any]:
    """Build the pass.json document for `content`, issued under `identity`."""
    design = content.design
    document: dict[str, Any] = {
        "formatVersion": 1,
        "passTypeIdentifier": identity.pass_type_identifier,
        "teamIdentifier": identity.team_identifier,
        "serialNumber": content.serial_number,
        "organizationName": design.organization_name,
        "description": design.description,
    }
    if design.logo_text is not None:
        document["logoText"] = design.logo_text
    document["foregroundColor"] = _rgb(design.colors.foreground)
    document["backgroundColor"] = _rgb(design.colors.background)
    document["labelColor"] = _rgb(design.colors.label)
    document["authenticationToken"] = content.authentication_token
    if content.web_service_url is not None:
        document["webServiceURL"] = content.web_service_url
    if content.voided:
        document["voided"] = True
    document.update(_relevance(content))
    for key, flag in (
        ("groupingIdentifier", design.grouping_identifier),
        ("suppressStripShine", design.suppress_strip_shine),
        ("sharingProhibited", design.sharing_prohibited),
    ):
        if flag is not None:
            document[key] = flag
    document[content.apple_style] = _style_dict(content)
    if design.event is not None and content.apple_style == "eventTicket":
        document.update(_event_keys(content, design.event))
    barcodes = _barcodes(content)
    if barcodes:
        document["barcodes"] = [rendered for _, rendered in barcodes]
        legacy = [rendered for fmt, rendered in barcodes if fmt in _LEGACY_BARCODE_FORMATS]
        if legacy:
            document["barcode"] = legacy[0]
    return document


def _event_keys(content: PassContent, event: Event) -> dict[str, Any]:
    """The design's event block (docs/templates.md#event): its semantic tags, and what a poster
    event ticket reads. A device before iOS 18 ignores `preferredStyleSchemes` and the poster
    keys; one that cannot show the poster falls back to the second scheme, the classic
    eventTicket this pass.json also holds."""
    found: dict[str, Any] = {}
    if event.poster:
        found["preferredStyleSchemes"] = list(POSTER_STYLE_SCHEMES)
    if event.logo_text is not None:
        found["eventLogoText"] = event.logo_text
    for key, url in event.links.given().items():
        found[APPLE_LINK_KEYS[key]] = url
    if event.venue is not None:
        for apple_key, value in (
            ("contactVenueEmail", event.venue.email),
            ("contactVenuePhoneNumber", event.venue.phone_number),
            ("contactVenueWebsite", event.venue.website),
        ):
            if value is not None:
                found[apple_key] = value
    found["semantics"] = _semantics(content, event)
    return found


def _semantics(content: PassContent, event: Event) -> dict[str, Any]:
    """Apple's semantic tags (Pass.SemanticTags) of the event, and of this pass's seat."""
    tags: dict[str, Any] = {"eventName": event.name, "eventStartDate": w3c_date(event.starts_at)}
    if event.type is not None:
        tags["eventType"] = APPLE_EVENT_TYPES[event.type]
    if event.ends_at is not None:
        tags["eventEndDate"] = w3c_date(event.ends_at)
    if event.doors_open_at is not None:
        tags["venueDoorsOpenDate"] = w3c_date(event.doors_open_at)
    venue = event.venue
    if venue is not None:
        tags["venueName"] = venue.name
        for key, value in (
            ("venueRegionName", venue.region),
            ("venueRoom", venue.room),
            ("venuePhoneNumber", venue.phone_number),
        ):
            if value is not None:
                tags[key] = value
        if venue.latitude is not None and venue.longitude is not None:
            tags["venueLocation"] = {"latitude": venue.latitude, "longitude": venue.longitude}
    if event.performers:
        tags["performerNames"] = list(event.performers)
    tags |= _team("homeTeam", event.home_team) | _team("awayTeam", event.away_team)
    if content.holder_name is not None:
        tags["attendeeName"] = content.holder_name
    defaults = {f.key: f.default for f in content.design.fields if f.default is not None}
    seat = seat_values(event, content.field_values, defaults)
    placed = {_SEAT_KEYS[part]: value for part, value in seat.items() if part in _SEAT_KEYS}
    if placed:
        tags["seats"] = [placed]
    if "gate" in seat:
        tags["venueEntranceGate"] = seat["gate"]
    return tags


def _team(prefix: str, team: Team | None) -> dict[str, str]:
    if team is None:
        return {}
    parts = (("Name", team.name), ("Abbreviation", team.abbreviation), ("Location", team.location))
    return {f"{prefix}{suffix}": value for suffix, value in parts if value is not None}


def _relevance(content: PassContent) -> dict[str, Any]:
    """When and where Wallet shows the pass on the lock screen, and when it expires."""
    design = content.design
    found: dict[str, Any] = {}
    expiration = content.expiration_date or design.expiration_date
    if expiration is not None:
        found["expirationDate"] = w3c_date(expiration)
    found.update(_relevant_dates(content))
    if design.locations:
        found["locations"] = [
            {
                key: value
                for key, value in (
                    ("latitude", location.latitude),
                    ("longitude", location.longitude),
                    ("altitude", location.altitude),
                    ("relevantText", location.relevant_text),
                )
                if value is not None
            }
            for location in design.locations
        ]
    if design.max_distance is not None:
        found["maxDistance"] = design.max_distance
    return found


def _relevant_dates(content: PassContent) -> dict[str, Any]:
    """`relevantDates` (iOS 18 and later) and `relevantDate` (the one moment older iOS reads).

    A pass's own relevant date stands alone: it is for another day than the design's windows.
    A single moment is written under both `date` (Apple's reference since iOS 26) and
    `relevantDate` (iOS 18's name for it), as passkit-generator writes it.
    """
    design = content.design
    moment = content.relevant_date or design.relevant_date
    windows = [] if content.relevant_date is not None else design.relevant_dates
    entries: list[dict[str, str]] = []
    if moment is not None:
        entries.append({"date": w3c_date(moment), "relevantDate": w3c_date(moment)})
    entries += [
        {"startDate": w3c_date(window.start_date), "endDate": w3c_date(window.end_date)}
        for window in windows
    ]
    if not entries:
        return {}
    if moment is None:
        moment = min(window.start_date for window in windows)
    return {"relevantDate": w3c_date(moment), "relevantDates": entries}


def expand_barcode_message(template: str, content: PassContent) -> str:
    """Replace `{serial_number}`, `{short_id}` and `{field_values.<key>}` in `template`."""

    def replace(match: re.Match[str]) -> str:
        if match.group(1) == "serial_number":
            return content.serial_number
        if match.group(1) == "short_id":
            return content.short_id
        return content.field_values.get(match.group(2), "")

    return BARCODE_PLACEHOLDER.sub(replace, template)


def _barcodes(content: PassContent) -> list[tuple[str, dict[str, str]]]:
    """(format, barcode dictionary) in priority order; a barcode whose message expands to
    nothing (e.g. `{field_values.x}` without a value) is left out: Wallet cannot draw it."""
    rendered: list[tuple[str, dict[str, str]]] = []
    for barcode in content.design.barcode_list():
        message = expand_barcode_message(barcode.message, content)
        if message:
            rendered.append((barcode.format, _barcode(barcode, message)))
    return rendered


def _barcode(barcode: Barcode, message: str) -> dict[str, str]:
    try:
        message.encode("iso-8859-1")
        encoding = "iso-8859-1"
    except UnicodeEncodeError:
        encoding = "utf-8"  # Latin-1 cannot carry it; Wallet encodes the message as UTF-8
    rendered = {
        "format": _BARCODE_FORMATS[barcode.format],
        "message": message,
        "messageEncoding": encoding,
    }
    if barcode.alt_text is not None:
        rendered["altText"] = barcode.alt_text
    return rendered


def _rgb(hex_color: str) -> str:
    red, green, blue = (int(hex_color[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgb({red}, {green}, {blue})"


def _style_dict(content: PassContent) -> dict[str, Any]:
    style: dict[str, Any] = {}
    if content.apple_style == "boardingPass":
        transit = (content.design.transit_type or "generic").capitalize()
        style["transitType"] = f"PKTransitType{transit}"
    by_slot: dict[str, list[dict[str, Any]]] = {slot: [] for slot, _ in _SLOT_KEYS}
    default_change = None if content.web_service_url is None else DEFAULT_CHANGE_MESSAGE
    for field in content.design.fields:
        rendered = render_field(field, content.field_values, default_change)
        if rendered is not None:
            by_slot[field.slot].append(rendered)
    has_holder_field = "holder_name" in content.design.field_keys()
    shown = len(by_slot["secondary"])
    if content.design.shares_secondary_with_auxiliary(content.apple_style):
        shown += len(by_slot["auxiliary"])  # four of both together (Design._check_field_layout)
    if content.holder_name is not None and not has_holder_field and shown < _SECONDARY_LIMIT:
        holder: dict[str, Any] = {
            "key": "holder_name",
            "label": "Name",
            "value": content.holder_name,
        }
        if default_change is not None:
            holder["changeMessage"] = default_change  # as every field of an updatable pass
        by_slot["secondary"].append(holder)
    for slot, json_key in _SLOT_KEYS:
        style[json_key] = by_slot[slot]
    return style


def render_field(
    field: DesignField, values: dict[str, str], default_change_message: str | None = None
) -> dict[str, Any] | None:
    """The field dictionary, or None when the pass has no value and the field no default. An
    empty value is no value (the default shows), as in the Google object, the semantic tags
    and the landing page.

    A date field whose value is not an ISO 8601 date-time with a time zone, or a number field
    whose value is not a number, is shown as plain text: Wallet refuses a pass otherwise.
    """
    value = values.get(field.key) or field.default
    if not value:
        return None
    rendered: dict[str, Any] = {"key": field.key, "label": field.label, "value": value}
    if field.text_alignment is not None:
        rendered["textAlignment"] = _ALIGNMENTS[field.text_alignment]
    change_message = field.change_message or default_change_message
    if change_message is not None:
        rendered["changeMessage"] = change_message
    if field.data_detectors is not None:
        rendered["dataDetectorTypes"] = [_DETECTORS[kind] for kind in field.data_detectors]
    if field.date_style is not None or field.time_style is not None:
        rendered.update(_date_options(field, value))
    elif field.number_style is not None or field.currency_code is not None:
        rendered.update(_number_options(field, value))
    return rendered


def _date_options(field: DesignField, value: str) -> dict[str, Any]:
    try:
        moment = parse_aware_datetime(value)
    except ValueError:
        return {}
    options: dict[str, Any] = {"value": w3c_date(moment)}
    for key, style in (("dateStyle", field.date_style), ("timeStyle", field.time_style)):
        if style is not None:
            options[key] = f"PKDateStyle{style.capitalize()}"
    if field.ignores_time_zone is not None:
        options["ignoresTimeZone"] = field.ignores_time_zone
    if field.is_relative is not None:
        options["isRelative"] = field.is_relative
    return options


def _number_options(field: DesignField, value: str) -> dict[str, Any]:
    try:
        number = decimal.Decimal(value.strip())
    except decimal.InvalidOperation:
        return {}
    # Past 10^15 a JSON number loses precision in Wallet, and under 10^-15 it shows as 0.
    # `adjusted()` (the exponent of the first digit) cannot overflow: comparing 1e1000000 with
    # a bound raised decimal.Overflow (a 500, and a pass that could never be rebuilt again).
    if not number.is_finite() or (number and not -_MAX_DIGITS <= number.adjusted() < _MAX_DIGITS):
        return {}
    options: dict[str, Any] = {
        "value": int(number) if number == number.to_integral_value() else float(number)
    }
    if field.currency_code is not None:
        options["currencyCode"] = field.currency_code
    if field.number_style is not None:
        options["numberStyle"] = _NUMBER_STYLES[field.number_style]
    return options
