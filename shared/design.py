"""The template `design` object: what a template fixes about every pass issued from it.

The spec leaves the inner structure of `design` open ("not shown"); this model is Tessera's
decision, documented in docs/templates.md. It carries what both Apple Wallet (pass.json) and
Google Wallet (classes and objects) need.
"""

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

FieldSlot = Literal["header", "primary", "secondary", "auxiliary", "back"]
BarcodeFormat = Literal["qr", "pdf417", "aztec", "code128"]
TransitType = Literal["air", "boat", "bus", "generic", "train"]

_HEX_COLOR = re.compile(r"^#[0-9A-Fa-f]{6}$")
_FIELD_KEY = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")

# Apple Wallet shows at most this many fields per slot (back fields are unlimited in practice).
SLOT_LIMITS: dict[str, int] = {
    "header": 3,
    "primary": 2,
    "secondary": 4,
    "auxiliary": 4,
    "back": 20,
}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DesignField(_Strict):
    key: str = Field(description="Key used in field_values, e.g. `seat`.")
    label: str = Field(max_length=100)
    slot: FieldSlot
    default: str | None = Field(default=None, max_length=500)

    @field_validator("key")
    @classmethod
    def _key_shape(cls, value: str) -> str:
        if not _FIELD_KEY.match(value):
            raise ValueError(
                "must start with a letter and hold only letters, digits and _ (max 64)"
            )
        return value


class Colors(_Strict):
    background: str = "#FFFFFF"
    foreground: str = "#000000"
    label: str = "#333333"

    @field_validator("background", "foreground", "label")
    @classmethod
    def _hex(cls, value: str) -> str:
        if not _HEX_COLOR.match(value):
            raise ValueError("must be a hex color like #1A2B3C")
        return value.upper()


class Barcode(_Strict):
    format: BarcodeFormat = "qr"
    # A template string: `{serial_number}`, `{short_id}` or `{field_values.<key>}` are replaced.
    message: str = Field(default="{serial_number}", max_length=500)
    alt_text: str | None = Field(default=None, max_length=100)


class Images(_Strict):
    """Base64-encoded PNG images. Rendering rules live in docs/templates.md."""

    icon: str | None = None
    logo: str | None = None
    strip: str | None = None
    thumbnail: str | None = None
    background: str | None = None
    footer: str | None = None


class Design(_Strict):
    organization_name: str = Field(min_length=1, max_length=100)
    description: str = Field(min_length=1, max_length=200)
    logo_text: str | None = Field(default=None, max_length=100)
    colors: Colors = Field(default_factory=Colors)
    fields: list[DesignField] = Field(default_factory=list, max_length=60)
    barcode: Barcode | None = None
    images: Images = Field(default_factory=Images)
    transit_type: TransitType | None = Field(
        default=None, description="Required for apple_style boardingPass."
    )

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
        return self

    def field_keys(self) -> set[str]:
        return {field.key for field in self.fields}
