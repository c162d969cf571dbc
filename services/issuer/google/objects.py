"""Template and pass -> Google Wallet class and object resources (walletobjects v1 JSON).

A template becomes one class, a pass one object of that class. Pure functions: no I/O. The
mapping (which design attribute lands in which Wallet field) is tabled in docs/google-wallet.md.
"""

import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final, Literal

from services.issuer.google.identity import GoogleIdentity
from shared.dates import w3c_date
from shared.design import BARCODE_PLACEHOLDER, Design
from shared.design_event import Event, seat_values
from shared.google_ids import class_id, object_id

Vertical = Literal["eventTicket", "loyalty", "offer", "generic"]
VERTICALS: Final[tuple[Vertical, ...]] = ("eventTicket", "loyalty", "offer", "generic")
# The text module that carries the holder on offers, which have no holder field of their own.
# Field keys start with a letter, so this id never collides with a design field's.
HOLDER_MODULE_ID: Final = "_holder"

_VERTICAL_BY_TYPE: Final[dict[str, Vertical]] = {
    "event": "eventTicket",
    "membership": "loyalty",
    "loyalty": "loyalty",
    "coupon": "offer",
    "generic": "generic",
}
_BARCODE_TYPES: Final = {
    "qr": "QR_CODE",
    "pdf417": "PDF_417",
    "aztec": "AZTEC",
    "code128": "CODE_128",
}
# Seat part (shared/design_event.SEAT_PARTS) -> key of Google's EventSeat.
_SEAT_KEYS: Final = {"section": "section", "row": "row", "number": "seat", "gate": "gate"}
# The same placeholders, with the same meaning, as the Apple barcode message (pkpass.py).


def vertical_for(template_type: str) -> Vertical:
    """The Wallet vertical of a template type: event -> eventTicket, coupon -> offer, ..."""
    try:
        return _VERTICAL_BY_TYPE[template_type]
    except KeyError:
        raise ValueError(f"no Google Wallet vertical for template type {template_type!r}") from None


def expand_barcode_message(
    template: str, *, serial_number: str, short_id: str, field_values: dict[str, str]
) -> str:
    """Replace `{serial_number}`, `{short_id}` and `{field_values.<key>}` in `template`."""

    def replace(match: re.Match[str]) -> str:
        if match.group(1) == "serial_number":
            return serial_number
        if match.group(1) == "short_id":
            return short_id
        return field_values.get(match.group(2), "")

    return BARCODE_PLACEHOLDER.sub(replace, template)


# The class fields a template's design decides (build_class, every vertical): an update sends
# them as the design has them now, and one the design no longer has is left out (removed).
# Every other field of the class at Google is kept as it is, since Google's update (PUT)
# replaces the whole class: those an operator set in the Wallet console (redemptionIssuers and
# enableSmartTap for Smart Tap, classTemplateInfo, links, messages, locations, ...).
CLASS_FIELDS_OF_DESIGN: Final = frozenset(
    {
        "id",
        "callbackOptions",
        "issuerName",
        "reviewStatus",
        "hexBackgroundColor",
        "eventName",
        "dateTime",
        "venue",
        "logo",
        "programName",
        "localizedProgramName",
        "programLogo",
        "title",
        "localizedTitle",
        "provider",
        "redemptionChannel",
        "titleImage",
    }
)
# What only Google writes on a class: not sent back.
_CLASS_OUTPUT_FIELDS: Final = frozenset({"kind", "review"})


def class_update(stored: Mapping[str, Any], resource: dict[str, Any]) -> dict[str, Any]:
    """The body of the update (PUT) that makes the class at Google, `stored`, the design's
    `resource`, with the fields the design does not decide kept as they are at Google."""
    kept = {
        key: value
        for key, value in stored.items()
        if key not in CLASS_FIELDS_OF_DESIGN and key not in _CLASS_OUTPUT_FIELDS
    }
    return kept | resource


def build_class(
    *,
    identity: GoogleIdentity,
    template_id: str,
    template_type: str,
    design: Design,
    logo_url: str | None = None,
    placeholder_logo_url: str | None = None,
    callback_url: str | None = None,
) -> dict[str, Any]:
    """The class resource of a template, its strings in the design's source language with the
    design's translations (`translatedValues`, as Wallet shows them by the phone's language).

    `logo_url` is a public URL of the design's logo (Google fetches images itself). Only the
    loyalty vertical requires a logo; without `logo_url` it uses `placeholder_logo_url`, and
    raises ValueError when both are None. The other verticals omit the logo instead.
    `callback_url` is where Google posts its signed save/delete callbacks for the class's
    objects (`callbackOptions.url`); None leaves callbacks off.
    """
    vertical = vertical_for(template_type)
    resource: dict[str, Any] = {"id": class_id(identity.issuer_id, template_id)}
    if callback_url is not None:
        resource["callbackOptions"] = {"url": callback_url}
    if vertical == "generic":
        # A generic class has no issuer, title or color fields: the object carries them.
        return resource
    resource["issuerName"] = _source_value(design.organization_name, design)
    resource["reviewStatus"] = "UNDER_REVIEW"
    resource["hexBackgroundColor"] = design.colors.background
    logo = None if logo_url is None else _image(logo_url, design, design.organization_name)
    if vertical == "eventTicket":
        event = design.event
        resource["eventName"] = _localized(event.name if event else design.description, design)
        if event is not None:
            resource |= _event_class(event, design)
        if logo is not None:
            resource["logo"] = logo
    elif vertical == "loyalty":
        resource["programName"] = _source_value(design.description, design)
        if (localized := _translations(design.description, design)) is not None:
            resource["localizedProgramName"] = localized
        if logo is None:
            if placeholder_logo_url is None:
                raise ValueError(
                    "a loyalty class needs programLogo: pass logo_url or placeholder_logo_url"
                )
            logo = _image(placeholder_logo_url, design, design.organization_name)
        resource["programLogo"] = logo
    else:  # offer
        resource["title"] = _source_value(design.description, design)
        if (localized := _translations(design.description, design)) is not None:
            resource["localizedTitle"] = localized
        resource["provider"] = design.organization_name
        resource["redemptionChannel"] = "INSTORE"
        if logo is not None:
            resource["titleImage"] = logo
    return resource


def build_object(
    *,
    identity: GoogleIdentity,
    template_id: str,
    template_type: str,
    design: Design,
    pass_id: str,
    serial_number: str,
    short_id: str,
    field_values: dict[str, str],
    holder_name: str | None,
    holder_email: str | None,
    voided: bool,
    logo_url: str | None = None,
    completed: bool = False,
    expiration_date: datetime | None = None,
) -> dict[str, Any]:
    """The object resource of a pass; `logo_url` is used by the generic vertical only.
    `expiration_date` (the pass's, or its design's) ends its `validTimeInterval`, so Google
    Wallet shows it expired when Apple Wallet does."""
    vertical = vertical_for(template_type)
    resource: dict[str, Any] = {
        "id": object_id(identity.issuer_id, pass_id),
        "classId": class_id(identity.issuer_id, template_id),
        # COMPLETED: the last allowed redemption was used (docs/redemption.md).
        "state": "INACTIVE" if voided else "COMPLETED" if completed else "ACTIVE",
    }
    if expiration_date is not None:
        resource["validTimeInterval"] = {"end": {"date": w3c_date(expiration_date)}}
    # Google shows one barcode: the first of the design's (in priority order) whose message
    # expands to something, as Apple's pass.json keeps only those (services/issuer/passjson.py):
    # an empty value is no barcode Wallet can draw, so a pass without one gets none.
    for candidate in design.barcode_list():
        value = expand_barcode_message(
            candidate.message,
            serial_number=serial_number,
            short_id=short_id,
            field_values=field_values,
        )
        if not value:
            continue
        barcode = {"type": _BARCODE_TYPES[candidate.format], "value": value}
        if candidate.alt_text is not None:
            barcode["alternateText"] = candidate.alt_text
        resource["barcode"] = barcode
        break
    modules = _text_modules(design, field_values)
    # Wallet has no e-mail field; a holder without a name is shown by e-mail instead.
    holder = holder_name or holder_email
    if vertical == "eventTicket":
        resource["ticketNumber"] = serial_number
        if holder:
            resource["ticketHolderName"] = holder
        if design.event is not None and (seat := _seat_info(design.event, design, field_values)):
            resource["seatInfo"] = seat
    elif vertical == "loyalty":
        resource["accountId"] = short_id
        if holder:
            resource["accountName"] = holder
    elif vertical == "offer":
        if holder:
            # First: Google shows 10 text modules of an object, and the holder's name was the
            # eleventh of a design with ten fields.
            modules.insert(0, {"id": HOLDER_MODULE_ID, "header": "Name", "body": holder})
    else:  # generic
        resource["cardTitle"] = _localized(design.organization_name, design)
        resource["header"] = _localized(design.description, design)
        if holder:
            resource["subheader"] = _localized(holder, design)
        resource["hexBackgroundColor"] = design.colors.background
        if logo_url is not None:
            resource["logo"] = _image(logo_url, design, design.organization_name)
    if modules:
        resource["textModulesData"] = modules
    return resource


def _event_class(event: Event, design: Design) -> dict[str, Any]:
    """The event block's `dateTime` and `venue` (docs/google-wallet.md), translated as the
    design's other strings."""
    times = {"start": w3c_date(event.starts_at)}
    if event.ends_at is not None:
        times["end"] = w3c_date(event.ends_at)
    if event.doors_open_at is not None:
        times["doorsOpen"] = w3c_date(event.doors_open_at)
    found: dict[str, Any] = {"dateTime": times}
    if event.venue is not None:
        found["venue"] = {
            "name": _localized(event.venue.name, design),
            "address": _localized(event.venue.address, design),
        }
    return found


def _seat_info(event: Event, design: Design, field_values: dict[str, str]) -> dict[str, Any]:
    """The pass's `seatInfo`, from the fields the event block's seat_fields name."""
    defaults = {f.key: f.default for f in design.fields if f.default is not None}
    seat = seat_values(event, field_values, defaults)
    return {_SEAT_KEYS[part]: _localized(value, design) for part, value in seat.items()}


def _text_modules(design: Design, field_values: dict[str, str]) -> list[dict[str, Any]]:
    modules: list[dict[str, Any]] = []
    for field in design.fields:
        # An empty value falls back to the default; a module with no body is left out.
        body = field_values.get(field.key) or field.default
        if not body:
            continue
        module: dict[str, Any] = {
            "id": field.key,
            "header": _source_value(field.label, design),
            "body": _source_value(body, design),
        }
        # The same strings Apple Wallet translates (docs/templates.md#localizations).
        if field.label and (header := _translations(field.label, design)) is not None:
            module["localizedHeader"] = header
        if (localized_body := _translations(body, design)) is not None:
            module["localizedBody"] = localized_body
        modules.append(module)
    return modules


def _localized(value: str, design: Design) -> dict[str, Any]:
    """A LocalizedString: the value in the design's source language, plus its translations."""
    source = _source_value(value, design)
    return _translations(value, design) or _default_only(source, design.source_language)


def _source_value(value: str, design: Design) -> str:
    """The string as the source language shows it: its own localization of it, if it has one
    (as Apple Wallet's .lproj of that language does), else the string as written."""
    return design.localizations.get(design.source_language, {}).get(value, value)


def _translations(value: str, design: Design) -> dict[str, Any] | None:
    """The LocalizedString of a string the design translates; None when no language does."""
    translated = _translated_values(value, design.localizations, design.source_language)
    if not translated:
        return None
    source = _default_only(_source_value(value, design), design.source_language)
    return {**source, "translatedValues": translated}


def _translated_values(
    value: str, localizations: Mapping[str, Mapping[str, str]], source: str
) -> list[dict[str, str]]:
    return [
        {"language": language, "value": strings[value]}
        for language, strings in sorted(localizations.items())
        if language != source and value in strings
    ]


def _default_only(value: str, language: str) -> dict[str, Any]:
    return {"defaultValue": {"language": language, "value": value}}


def _image(url: str, design: Design, description: str) -> dict[str, Any]:
    return {"sourceUri": {"uri": url}, "contentDescription": _localized(description, design)}
