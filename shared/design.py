"""The template `design` object (docs/templates.md): what every pass of a template shares.

Everything the design alone decides is checked here, so the api refuses it with a precise
`param`; what depends on the template's `apple_style` waits for `Design.check_style`.
"""

import re
from typing import Annotated, Any, Literal

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StringConstraints,
    ValidationInfo,
    field_validator,
    model_validator,
)

from shared.dates import IsoDateTime, date_text_problem, offset_problem
from shared.design_event import Event
from shared.design_images import (
    IMAGE_MAX_POINTS,
    MAX_IMAGE_BYTES,
    PNG_SIGNATURE,
    SCALES,
    STORED,
    STYLE_IMAGES,
    Images,
    ImageScales,
    check_google_logo,
    check_png,
    decode_base64_png,
    is_stored,
    png_size,
)

__all__ = [
    "IMAGE_MAX_POINTS",
    "MAX_IMAGE_BYTES",
    "PNG_SIGNATURE",
    "SCALES",
    "SLOT_LIMITS",
    "STYLE_IMAGES",
    "Barcode",
    "Colors",
    "Design",
    "DesignField",
    "DesignStyleError",
    "ImageScales",
    "Images",
    "Location",
    "RelevantWindow",
    "check_png",
    "decode_base64_png",
    "png_size",
]

FieldSlot = Literal["header", "primary", "secondary", "auxiliary", "back"]
BarcodeFormat = Literal["qr", "pdf417", "aztec", "code128"]
TransitType = Literal["air", "boat", "bus", "generic", "train"]
TextAlignment = Literal["left", "center", "right", "natural"]
DateStyle = Literal["none", "short", "medium", "long", "full"]
NumberStyle = Literal["decimal", "percent", "scientific", "spell_out"]
DataDetector = Literal["phone_number", "link", "address", "calendar_event"]

# fullmatch, not match with `$`: `$` also matches before a trailing newline.
_HEX_COLOR = re.compile(r"#[0-9A-Fa-f]{6}")
_FIELD_KEY = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_CONTROL_EXCEPT_WHITESPACE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")

# Apple Wallet shows at most this many fields per slot (back fields are unlimited in practice).
SLOT_LIMITS: dict[str, int] = {
    "header": 3,
    "primary": 2,
    "secondary": 4,
    "auxiliary": 4,
    "back": 20,
}

GROUPING_STYLES = frozenset({"eventTicket", "boardingPass"})
# Coupons, store cards and generic passes with a square barcode show this many secondary and
# auxiliary fields together (Design._check_field_layout).
COMBINED_SECONDARY_AUXILIARY = 4
SQUARE_BARCODES = frozenset({"qr", "aztec"})
MAX_LOCATIONS = 10  # Wallet ignores locations past the tenth
MAX_RELEVANT_WINDOWS = 10

LanguageCode = Annotated[
    str, StringConstraints(pattern=r"^[a-z]{2,3}(-[A-Z][a-z]{3})?(-(?:[A-Z]{2}|[0-9]{3}))?$")
]
StringKey = Annotated[str, StringConstraints(min_length=1, max_length=200)]
StringValue = Annotated[str, StringConstraints(min_length=1, max_length=2000)]


class DesignStyleError(ValueError):
    """A design that is valid on its own but not for the template's apple_style."""

    def __init__(self, param: str, message: str):
        super().__init__(message)
        self.param = param  # dotted path under `design`, e.g. "images.strip"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _w3c(value: AwareDatetime | None, info: ValidationInfo) -> AwareDatetime | None:
    """Refuse what pydantic reads but a W3C date cannot write (an offset with seconds). A
    design saved before that was refused stays usable: pass.json rounds the offset."""
    if value is not None and not is_stored(info) and (problem := offset_problem(value)):
        raise ValueError(problem)
    return value


class DesignField(_Strict):
    key: str = Field(description="Key used in field_values, e.g. `seat`.")
    label: str = Field(
        max_length=100, description="The field's label on the pass, up to 100 characters."
    )
    slot: FieldSlot = Field(
        description="Where the pass shows it: `header`, `primary`, `secondary`, `auxiliary` "
        "or `back`."
    )
    default: str | None = Field(
        default=None,
        max_length=500,
        description="The value shown when a pass has none for the key.",
    )
    text_alignment: TextAlignment | None = Field(
        None, description="`left`, `center`, `right` or `natural`; not on primary or back fields."
    )
    date_style: DateStyle | None = Field(
        None,
        description="Wallet shows the value as a date in the viewer's locale: `none`, "
        "`short`, `medium`, `long` or `full`.",
    )
    time_style: DateStyle | None = Field(None, description="The same, for the time of day.")
    ignores_time_zone: StrictBool | None = Field(
        None,
        description="Show the date and time as given, not in the viewer's zone (date fields only).",
    )
    is_relative: StrictBool | None = Field(
        None, description='Show the date relative to now, e.g. "in 2 days" (date fields only).'
    )
    number_style: NumberStyle | None = Field(
        None,
        description="Wallet shows the value as a number: `decimal`, `percent`, `scientific` "
        "or `spell_out`.",
    )
    currency_code: str | None = Field(
        default=None,
        pattern=r"^[A-Z]{3}$",
        description="ISO 4217 code (`EUR`): Wallet shows the value as an amount.",
    )
    change_message: str | None = Field(
        default=None,
        max_length=200,
        description="The notification Wallet shows when the field changes; `%@` is the new "
        "value. Null: `Changed to %@` on a pass that can be updated.",
    )
    data_detectors: list[DataDetector] | None = Field(
        default=None,
        max_length=4,
        description="On back fields, what Wallet turns into links: `phone_number`, `link`, "
        "`address`, `calendar_event`; null for all, [] for none.",
    )

    @field_validator("key")
    @classmethod
    def _key_shape(cls, value: str) -> str:
        if not _FIELD_KEY.fullmatch(value):
            raise ValueError(
                "must start with a letter and hold only letters, digits and _ (max 64)"
            )
        return value

    @field_validator("change_message")
    @classmethod
    def _has_placeholder(cls, value: str | None) -> str | None:
        if value is not None and "%@" not in value:
            raise ValueError("must contain %@, where Wallet puts the new value")
        return value

    @model_validator(mode="after")
    def _consistent_options(self) -> "DesignField":
        dated = self.date_style is not None or self.time_style is not None
        numeric = self.number_style is not None or self.currency_code is not None
        if dated and numeric:
            raise ValueError("a field is either a date (date_style, time_style) or a number")
        if self.number_style is not None and self.currency_code is not None:
            raise ValueError("use number_style or currency_code, not both")
        if not dated and (self.ignores_time_zone is not None or self.is_relative is not None):
            raise ValueError("ignores_time_zone and is_relative need date_style or time_style")
        if self.text_alignment is not None and self.slot in ("primary", "back"):
            raise ValueError("text_alignment is not allowed on primary or back fields")
        if self.data_detectors is not None and self.slot != "back":
            raise ValueError("data_detectors only apply to back fields")
        return self

    @model_validator(mode="after")
    def _w3c_default(self, info: ValidationInfo) -> "DesignField":
        """A date field's default, like its values (docs/templates.md), when it is a date."""
        dated = self.date_style is not None or self.time_style is not None
        if not dated or self.default is None or is_stored(info):
            return self
        if (problem := date_text_problem(self.default)) is not None:
            raise ValueError(f"default {self.default!r} {problem}")
        return self


class Colors(_Strict):
    background: str = Field("#FFFFFF", description="Background color of the pass, `#RRGGBB`.")
    foreground: str = Field("#000000", description="Color of field values, `#RRGGBB`.")
    label: str = Field("#333333", description="Color of field labels, `#RRGGBB`.")

    @field_validator("background", "foreground", "label")
    @classmethod
    def _hex(cls, value: str) -> str:
        if not _HEX_COLOR.fullmatch(value):
            raise ValueError("must be a hex color like #1A2B3C")
        return value.upper()


# What a barcode message may name in braces (docs/templates.md#barcodes); the issuer's renderers
# (passjson.py, google/objects.py) replace exactly these.
BARCODE_PLACEHOLDERS = ("{serial_number}", "{short_id}", "{field_values.<key>}")
_PLACEHOLDER = re.compile(r"serial_number|short_id|field_values\.[A-Za-z0-9_]+")
# A placeholder in a message: group 1 its name, group 2 the key of a `field_values.<key>` one.
BARCODE_PLACEHOLDER = re.compile(r"\{(serial_number|short_id|field_values\.([A-Za-z0-9_]+))\}")
# Braces around a name-like word are taken for a placeholder; other braces (JSON, `{ }`) are text.
_BRACED_NAME = re.compile(r"\{([A-Za-z_][A-Za-z0-9_.]*)\}")


class Barcode(_Strict):
    format: BarcodeFormat = Field("qr", description="`qr`, `pdf417`, `aztec` or `code128`.")
    # A template string: `{serial_number}`, `{short_id}` or `{field_values.<key>}` are replaced.
    message: str = Field(
        default="{serial_number}",
        min_length=1,
        max_length=500,
        description="What the barcode encodes: a template string in which "
        "`{serial_number}`, `{short_id}` and `{field_values.<key>}` are "
        "replaced for each pass.",
    )
    alt_text: str | None = Field(
        default=None, max_length=100, description="Text shown under the barcode."
    )

    def field_keys(self) -> list[str]:
        """The keys of the `{field_values.<key>}` its message shows, in order."""
        return [key for _, key in BARCODE_PLACEHOLDER.findall(self.message) if key]

    @field_validator("message")
    @classmethod
    def _known_placeholders(cls, value: str, info: ValidationInfo) -> str:
        """A misspelt placeholder would print literally on every pass: refuse it. A design
        saved before this check loads as it was (its braces stay text, as they were)."""
        if is_stored(info):
            return value
        for match in _BRACED_NAME.finditer(value):
            if _PLACEHOLDER.fullmatch(match.group(1)) is None:
                raise ValueError(
                    f"unknown placeholder {match.group(0)}; the placeholders are "
                    f"{', '.join(BARCODE_PLACEHOLDERS)}"
                )
        return value


class Location(_Strict):
    latitude: StrictFloat = Field(ge=-90, le=90, description="Degrees, -90 to 90.")
    longitude: StrictFloat = Field(ge=-180, le=180, description="Degrees, -180 to 180.")
    altitude: StrictFloat | None = Field(default=None, ge=-1000, le=100_000, description="Meters.")
    relevant_text: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="What the lock screen says near this place.",
    )


class RelevantWindow(_Strict):
    """A time window in which Wallet shows the pass (pass.json `relevantDates`, iOS 18)."""

    start_date: IsoDateTime = Field(
        description="Start of the window: ISO 8601 date-time with a time zone (`Z` or `+hh:mm`)."
    )
    end_date: IsoDateTime = Field(
        description="End of the window, after its start: ISO 8601 date-time with a time "
        "zone (`Z` or `+hh:mm`)."
    )

    _w3c_dates = field_validator("start_date", "end_date")(_w3c)

    @model_validator(mode="after")
    def _ordered(self) -> "RelevantWindow":
        if self.end_date <= self.start_date:
            raise ValueError("end_date must be after start_date")
        return self


class Design(_Strict):
    organization_name: str = Field(
        min_length=1,
        max_length=100,
        description="Your organization's name: Apple shows it on the lock screen and in "
        "notifications.",
    )
    description: str = Field(
        min_length=1,
        max_length=200,
        description="What the pass is, for accessibility (VoiceOver reads it).",
    )
    logo_text: str | None = Field(
        default=None, max_length=100, description="Text next to the logo."
    )
    colors: Colors = Field(default_factory=Colors, description="The pass's colors.")
    fields: list[DesignField] = Field(
        default_factory=list,
        max_length=60,
        description="The pass's fields, up to 60, keys unique; a pass fills them through "
        "`field_values.<key>`.",
    )
    barcode: Barcode | None = Field(None, description="One barcode; or use `barcodes`.")
    barcodes: list[Barcode] = Field(
        default_factory=list, max_length=4, description="Several barcodes; not with `barcode`."
    )
    images: Images = Field(
        default_factory=Images,
        description="Base64 PNG images, each a string (@1x) or `{x1, x2, x3}` scales.",
    )
    transit_type: TransitType | None = Field(
        default=None, description="Required for apple_style boardingPass."
    )
    localizations: dict[LanguageCode, dict[StringKey, StringValue]] = Field(
        default_factory=dict,
        max_length=40,
        description="Translations of the design's strings, by language (`de`, `pt-BR`): "
        "each a map from the string in `source_language` to its translation.",
    )
    source_language: LanguageCode = Field(
        default="en", description="The language the design's own strings are written in."
    )
    expiration_date: IsoDateTime | None = Field(
        None,
        description="When Wallet shows the pass as expired: ISO 8601 date-time with a time "
        "zone (`Z` or `+hh:mm`).",
    )
    relevant_date: IsoDateTime | None = Field(
        None,
        description="When the pass is relevant (shown on the lock screen): ISO 8601 "
        "date-time with a time zone (`Z` or `+hh:mm`).",
    )
    relevant_dates: list[RelevantWindow] = Field(
        default_factory=list,
        max_length=MAX_RELEVANT_WINDOWS,
        description="Up to 10 windows in which the pass is relevant (iOS 18 and later).",
    )
    locations: list[Location] = Field(
        default_factory=list,
        max_length=MAX_LOCATIONS,
        description="Up to 10 places where the pass is relevant.",
    )
    max_distance: StrictInt | None = Field(default=None, gt=0, le=100_000, description="Meters.")
    grouping_identifier: str | None = Field(
        default=None,
        min_length=1,
        max_length=100,
        description="Groups passes in Wallet; eventTicket and boardingPass only.",
    )
    suppress_strip_shine: StrictBool | None = Field(
        None, description="true turns off the shine on the strip image (older iOS)."
    )
    sharing_prohibited: StrictBool | None = Field(
        None, description="true hides Wallet's share button."
    )
    event: Event | None = Field(
        default=None, description="The event of a type event / eventTicket template."
    )
    google_logo: str | None = Field(
        default=None,
        max_length=1_500_000,
        description="Base64 square PNG, at least 660x660 px: Google Wallet's logo.",
    )

    _w3c_dates = field_validator("expiration_date", "relevant_date")(_w3c)

    @field_validator("google_logo")
    @classmethod
    def _square_google_logo(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None or is_stored(info):
            return value
        return check_google_logo(value).encoded

    @field_validator("localizations")
    @classmethod
    def _strings(cls, value: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
        for language, strings in value.items():
            if len(strings) > 500:
                raise ValueError(f"at most 500 strings per language ({language!r})")
            for key, text in strings.items():
                if _CONTROL.search(key):
                    raise ValueError(f"key {key!r} ({language}) holds a control character")
                if _CONTROL_EXCEPT_WHITESPACE.search(text):
                    raise ValueError(f"value of {key!r} ({language}) holds a control character")
        return value

    @model_validator(mode="after")
    def _unique_keys_and_slot_limits(self) -> "Design":
        seen: set[str] = set()
        per_slot: dict[str, int] = {}
        for field in self.fields:
            if field.key in seen:
                raise ValueError(f"duplicate field key {field.key!r}")
            seen.add(field.key)
            per_slot[field.slot] = per_slot.get(field.slot, 0) + 1
        for slot, count in per_slot.items():
            if count > SLOT_LIMITS[slot]:
                raise ValueError(f"at most {SLOT_LIMITS[slot]} fields in slot {slot!r}")
        if self.barcode is not None and self.barcodes:
            raise ValueError("set barcode or barcodes, not both")
        return self

    def _check_field_layout(self, apple_style: str) -> None:
        """What Wallet shows of each slot for this style (Apple's PassFields reference): one
        primary field (a boarding pass: two, origin and destination), and on a coupon, a store
        card or a generic pass with a square barcode at most four secondary and auxiliary fields
        together. Wallet hides the rest without a word, so they are refused, naming the first
        field that would not show."""
        primary_limit = 2 if apple_style == "boardingPass" else 1
        combined = self.shares_secondary_with_auxiliary(apple_style)
        primary = secondary_and_auxiliary = 0
        for index, field in enumerate(self.fields):
            if field.slot == "primary":
                primary += 1
                if primary > primary_limit:
                    raise DesignStyleError(
                        f"fields.{index}.slot",
                        f"apple_style {apple_style} shows {primary_limit} primary "
                        f"field{'s' if primary_limit > 1 else ''}; Wallet would hide field "
                        f"{field.key!r}. Move it to another slot.",
                    )
            elif combined and field.slot in ("secondary", "auxiliary"):
                secondary_and_auxiliary += 1
                if secondary_and_auxiliary > COMBINED_SECONDARY_AUXILIARY:
                    kind = (
                        "a generic pass with a square barcode"
                        if apple_style == "generic"
                        else (f"apple_style {apple_style}")
                    )
                    raise DesignStyleError(
                        f"fields.{index}.slot",
                        f"{kind} shows at most {COMBINED_SECONDARY_AUXILIARY} secondary and "
                        f"auxiliary fields together; Wallet would hide field {field.key!r}. "
                        "Move it to the back.",
                    )

    @classmethod
    def from_stored(cls, data: Any) -> "Design":
        """Load a design saved earlier: the shape is validated, the PNGs not decoded again."""
        return cls.model_validate(data, context=STORED)

    def _check_barcode_fields(self) -> None:
        """A barcode's `{field_values.<key>}` must name a field of the design: no pass could
        be given a value for another key (field_values take the design's keys only), so its
        barcode would be left out of every pass."""
        keys = self.field_keys()
        for index, barcode in enumerate(self.barcode_list()):
            for key in barcode.field_keys():
                if key not in keys:
                    raise DesignStyleError(
                        f"{self.barcode_path(index)}.message",
                        f"{{field_values.{key}}} names no field of the design, so no pass "
                        f"could carry it; add a field with key {key!r} (a back field keeps it "
                        "off the front).",
                    )

    def barcode_path(self, index: int) -> str:
        """Where the `index`-th of `barcode_list()` is, under `design`."""
        return "barcode" if self.barcode is not None else f"barcodes.{index}"

    def shares_secondary_with_auxiliary(self, apple_style: str) -> bool:
        """Whether Wallet shows at most four secondary and auxiliary fields together for this
        style (a coupon, a store card, a generic pass with a square barcode)."""
        square = any(code.format in SQUARE_BARCODES for code in self.barcode_list()[:1])
        return apple_style in ("coupon", "storeCard") or (apple_style == "generic" and square)

    def field_keys(self) -> set[str]:
        return {field.key for field in self.fields}

    def barcode_list(self) -> list[Barcode]:
        """The barcodes in priority order, whichever of `barcode` / `barcodes` was used."""
        return [self.barcode] if self.barcode is not None else list(self.barcodes)

    def check_style(self, apple_style: str, template_type: str | None = None) -> None:
        """Raise DesignStyleError if this design cannot be rendered as `apple_style` (and, for
        what depends on it, for a template of `template_type`)."""
        allowed = STYLE_IMAGES.get(apple_style)
        if allowed is None:
            raise DesignStyleError("", f"unknown apple_style {apple_style!r}")
        given = self.images.given()
        for name in given:
            if name not in allowed:
                raise DesignStyleError(
                    f"images.{name}",
                    f"apple_style {apple_style} does not show a {name} image; "
                    f"it allows {', '.join(sorted(allowed))}.",
                )
        if apple_style == "eventTicket" and "strip" in given:
            conflict = sorted({"background", "thumbnail"}.intersection(given))
            if conflict:
                raise DesignStyleError(
                    "images.strip",
                    f"An eventTicket shows a strip image or a {' and '.join(conflict)}, not both.",
                )
        self._check_field_layout(apple_style)
        self._check_barcode_fields()
        if apple_style == "boardingPass" and self.transit_type is None:
            raise DesignStyleError(
                "transit_type", "A boardingPass template needs design.transit_type."
            )
        self._check_event(apple_style, template_type)
        if self.grouping_identifier is not None and apple_style not in GROUPING_STYLES:
            raise DesignStyleError(
                "grouping_identifier",
                "grouping_identifier is only for eventTicket or boardingPass.",
            )

    def _check_event(self, apple_style: str, template_type: str | None) -> None:
        """The event block against the template, and the poster's artwork: only a poster
        ticket shows it, so without one it would ride in every pass for nothing."""
        if self.event is not None:
            problem = self.event.style_problem(
                apple_style=apple_style,
                template_type=template_type,
                field_keys=self.field_keys(),
                has_barcode=bool(self.barcode_list()),
            )
            if problem is not None:
                raise DesignStyleError(*problem)
        if self.images.artwork is not None and (self.event is None or not self.event.poster):
            raise DesignStyleError(
                "images.artwork",
                "Only a poster event ticket shows the artwork image: set design.event.poster "
                "to true, or leave the artwork out.",
            )
