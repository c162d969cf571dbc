"""The images of a template design: PNG checks, cleaning, size limits, and scales.

Sizes are read from the IHDR chunk before anything is decoded, so a decompression bomb is
refused unopened; the design keeps only the cleaned PNG. The rules: docs/templates.md#images.
"""

import base64
import binascii
import hashlib
import struct
import zlib
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from shared.bounded_cache import BoundedCache
from shared.png_clean import MAX_DECODE_PIXELS, clean_png
from shared.png_clean import PNG_SIGNATURE as PNG_SIGNATURE

_PNG_IEND = b"\x00\x00\x00\x00IEND\xaeB`\x82"
MAX_IMAGE_BYTES = 1024 * 1024  # per image file, decoded
# The largest space (width, height in points) Wallet gives each image; an image may be smaller.
# At @2x and @3x the limit in pixels is the points times the scale.
IMAGE_MAX_POINTS: dict[str, tuple[int, int]] = {
    "icon": (38, 38),
    "logo": (160, 50),
    "strip": (375, 144),
    "thumbnail": (90, 90),
    "background": (180, 220),
    "footer": (286, 15),
}
# The smallest an image may be, in points (times the scale in pixels): Wallet blows a smaller
# icon up, blurred, on the lock screen and in notifications (Apple's 29x29 pt minimum).
IMAGE_MIN_POINTS: dict[str, tuple[int, int]] = {"icon": (29, 29)}
SCALES: dict[str, int] = {"x1": 1, "x2": 2, "x3": 3}
# Google Wallet masks its logo into a circle and wants a square of at least this many pixels.
GOOGLE_LOGO_MIN_PIXELS = 660
# Which images each apple_style shows (Apple's "Pass Design and Creation" guide).
STYLE_IMAGES: dict[str, frozenset[str]] = {
    "boardingPass": frozenset({"icon", "logo", "footer"}),
    "coupon": frozenset({"icon", "logo", "strip"}),
    # artwork: the poster of an iOS 18 poster event ticket (design.event.poster); the classic
    # layout does not show it.
    "eventTicket": frozenset({"icon", "logo", "strip", "background", "thumbnail", "artwork"}),
    "generic": frozenset({"icon", "logo", "thumbnail"}),
    "storeCard": frozenset({"icon", "logo", "strip"}),
}


def decode_base64_png(encoded: str) -> bytes:
    """Decode a base64 PNG and check its signature, IHDR and IEND; return the PNG bytes."""
    try:
        # Whitespace is tolerated because wrapped (MIME-style) base64 is common in pasted JSON.
        data = base64.b64decode("".join(encoded.split()), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError("is not valid base64") from exc
    if len(data) > MAX_IMAGE_BYTES:
        raise ValueError(f"is {len(data)} bytes; at most {MAX_IMAGE_BYTES} bytes")
    if not data.startswith(PNG_SIGNATURE):
        raise ValueError("is not a PNG (bad signature)")
    png_size(data)
    if not data.endswith(_PNG_IEND):
        raise ValueError("is not a complete PNG (no IEND chunk at the end)")
    return data


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height from the IHDR chunk that must follow the PNG signature."""
    header = data[8:33]
    if len(header) < 25 or header[4:8] != b"IHDR" or header[:4] != b"\x00\x00\x00\x0d":
        raise ValueError("is not a PNG (no IHDR chunk)")
    (crc,) = struct.unpack(">I", header[21:25])
    if zlib.crc32(header[4:21]) & 0xFFFFFFFF != crc:
        raise ValueError("is not a PNG (IHDR checksum mismatch)")
    width, height = struct.unpack(">II", header[8:16])
    if width == 0 or height == 0:
        raise ValueError("is not a PNG (zero width or height)")
    return width, height


@dataclass(frozen=True)
class CleanPng:
    """A checked and cleaned image: the PNG, its base64 (as a design keeps it) and its size."""

    data: bytes
    encoded: str
    width: int
    height: int


# Cleaned images by the SHA-256 of the base64 they came from. A design is validated more than
# once (the string shorthand, then its x1; again when a pass is built from it), and decoding
# is the costly part; the cleaned PNG is entered under its own base64 as well.
_CLEANED: BoundedCache[bytes, CleanPng] = BoundedCache(
    32 * 1024 * 1024, lambda clean: len(clean.data) + len(clean.encoded)
)


def check_png(encoded: str, image: str, scale: int) -> CleanPng:
    """Decode `encoded` as the `image` (e.g. "icon") at `scale`, enforce its limits, clean it.

    An image name without a known limit gets only the decode budget (MAX_DECODE_PIXELS).
    """
    limit = IMAGE_MAX_POINTS.get(image)
    max_size = None if limit is None else (limit[0] * scale, limit[1] * scale)
    least = IMAGE_MIN_POINTS.get(image)
    min_size = None if least is None else (least[0] * scale, least[1] * scale)
    return _clean(encoded, image if scale == 1 else f"{image}@{scale}x", max_size, min_size)


def check_google_logo(encoded: str) -> CleanPng:
    """Decode and clean the design's `google_logo`: a square PNG of at least
    GOOGLE_LOGO_MIN_PIXELS a side (Google's brand guidelines); it has a single scale."""
    try:
        width, height = png_size(decode_base64_png(encoded))
    except ValueError as exc:
        raise ValueError(f"image 'google_logo' {exc}") from exc
    if width != height:
        raise ValueError(f"image 'google_logo' is {width}x{height} px; it must be square")
    least = (GOOGLE_LOGO_MIN_PIXELS, GOOGLE_LOGO_MIN_PIXELS)
    return _clean(encoded, "google_logo", None, least)


def clean_stored_png(encoded: str, label: str) -> CleanPng:
    """An image of a design saved earlier, cleaned (it may predate cleaning).

    Only the decode budget applies, not the image's own pixel limit: Wallet scales a larger
    image down, and a template saved before the limits existed must still issue passes.
    """
    return _clean(encoded, label, None)


def _clean(
    encoded: str,
    label: str,
    max_size: tuple[int, int] | None,
    min_size: tuple[int, int] | None = None,
) -> CleanPng:
    key = _cache_key(encoded)
    found = _CLEANED.get(key)
    try:
        if found is None:
            data = decode_base64_png(encoded)
            width, height = png_size(data)
        else:
            width, height = found.width, found.height
        if max_size is not None and (width > max_size[0] or height > max_size[1]):
            raise ValueError(f"is {width}x{height} px; at most {max_size[0]}x{max_size[1]} px")
        if min_size is not None and (width < min_size[0] or height < min_size[1]):
            raise ValueError(f"is {width}x{height} px; at least {min_size[0]}x{min_size[1]} px")
        if found is None:
            # The pixel limits above are checked on IHDR before this decodes anything.
            clean = clean_png(data, MAX_DECODE_PIXELS)
            found = CleanPng(clean, base64.b64encode(clean).decode("ascii"), width, height)
            _CLEANED.put(key, found)
            _CLEANED.put(_cache_key(found.encoded), found)
    except ValueError as exc:
        raise ValueError(f"image {label!r} {exc}") from exc
    return found


def _cache_key(encoded: str) -> bytes:
    # surrogatepass: a lone surrogate is refused later as bad base64, not here as a crash.
    return hashlib.sha256(encoded.encode("utf-8", "surrogatepass")).digest()


STORED: dict[str, bool] = {"stored": True}


def is_stored(info: ValidationInfo) -> bool:
    """Whether a design saved earlier is being loaded (validation context STORED).

    Its PNGs were checked and cleaned when it was saved; loading it again skips the decoding,
    and a design saved before a limit existed stays usable. The .pkpass build and the public
    logo clean every image again (clean_stored_png, cached), for designs saved before cleaning.
    """
    return isinstance(info.context, dict) and info.context.get("stored") is True


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ImageScales(_Strict):
    """One image at up to three scales: base64 PNGs for `<name>.png`, `@2x` and `@3x`.

    A bare string is accepted as the @1x image and is stored as a string again.
    """

    image_name: ClassVar[str] = "image"
    x1: str = Field(description="Base64 PNG written as `<name>.png`.", max_length=1_500_000)
    x2: str | None = Field(
        default=None, max_length=1_500_000, description="Base64 PNG written as `<name>@2x.png`."
    )
    x3: str | None = Field(
        default=None, max_length=1_500_000, description="Base64 PNG written as `<name>@3x.png`."
    )

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any, info: ValidationInfo) -> Any:
        if not isinstance(data, str):
            return data
        if is_stored(info):
            return {"x1": data}
        # Checked here, so that the error's path is the image itself, as it was sent; x1 then
        # finds the cleaned image in the cache.
        return {"x1": check_png(data, cls.image_name, 1).encoded}

    @field_validator("x1", "x2", "x3")
    @classmethod
    def _png(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None or is_stored(info):
            return value
        return check_png(value, cls.image_name, SCALES[str(info.field_name)]).encoded

    @model_serializer(mode="plain")
    def _compact(self) -> str | dict[str, str | None]:
        if self.x2 is None and self.x3 is None:
            return self.x1
        return {"x1": self.x1, "x2": self.x2, "x3": self.x3}

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        schema = handler(core_schema)
        if handler.mode == "validation":
            return {"anyOf": [{"type": "string", "description": "Base64 PNG (@1x)."}, schema]}
        return schema

    def largest(self) -> tuple[int, str]:
        """(scale, base64 PNG) of the sharpest variant, e.g. for Google Wallet's logo."""
        scale = max(self.scales())
        return scale, self.scales()[scale]

    def scales(self) -> dict[int, str]:
        """The given variants by scale factor (1, 2, 3)."""
        given = {1: self.x1, 2: self.x2, 3: self.x3}
        return {scale: value for scale, value in given.items() if value is not None}


class IconImage(ImageScales):
    image_name: ClassVar[str] = "icon"


class LogoImage(ImageScales):
    image_name: ClassVar[str] = "logo"


class StripImage(ImageScales):
    image_name: ClassVar[str] = "strip"


class ThumbnailImage(ImageScales):
    image_name: ClassVar[str] = "thumbnail"


class BackgroundImage(ImageScales):
    image_name: ClassVar[str] = "background"


class FooterImage(ImageScales):
    image_name: ClassVar[str] = "footer"


class ArtworkImage(ImageScales):
    image_name: ClassVar[str] = "artwork"


class Images(_Strict):
    """PNG images, each a base64 string (@1x) or {"x1", "x2", "x3"}; see docs/templates.md."""

    icon: IconImage | None = Field(
        None, description="Lock screen and notifications, 38 x 38 points; generated when left out."
    )
    logo: LogoImage | None = Field(None, description="Top left of the pass, up to 160 x 50 points.")
    strip: StripImage | None = Field(
        None,
        description="Behind the primary fields, up to 375 x 144 points (eventTicket, "
        "storeCard, coupon).",
    )
    thumbnail: ThumbnailImage | None = Field(
        None, description="Next to the fields, up to 90 x 90 points (eventTicket, generic)."
    )
    background: BackgroundImage | None = Field(
        None, description="Blurred behind the front, up to 180 x 220 points (eventTicket)."
    )
    footer: FooterImage | None = Field(
        None, description="Above the barcode, up to 286 x 15 points (boardingPass)."
    )
    artwork: ArtworkImage | None = Field(
        None, description="The poster of a poster event ticket (`event.poster`)."
    )

    def given(self) -> dict[str, ImageScales]:
        """The images that are set, by name, in pass file order."""
        names = ("icon", "logo", "strip", "thumbnail", "background", "footer", "artwork")
        found = {name: getattr(self, name) for name in names}
        return {name: image for name, image in found.items() if image is not None}


# Versions by (template id, design version, which image): a design version's images never
# change, and hashing a logo (up to megabytes of base64) for every pass synced, rolled out or
# shown cost more than the pass.
_VERSIONS: BoundedCache[tuple[str, int, str], str] = BoundedCache(10_000, lambda _: 1)


def template_image_version(
    template_id: str, design_version: int, which: str, image: ImageScales | str
) -> str:
    """`image_version`, computed once per template design version and image."""
    key = (template_id, design_version, which)
    found = _VERSIONS.get(key)
    if found is None:
        found = image_version(image)
        _VERSIONS.put(key, found)
    return found


def image_version(image: ImageScales | str) -> str:
    """A short digest of an image as stored (base64 text, at every scale): put in the URL it
    is served at (`?v=`), so a replaced image has a new URL. Google Wallet keeps its own copy
    of an image fetched by URL, and browsers cache it: the same URL would keep the old one."""
    if isinstance(image, str):
        data = image
    else:
        data = "|".join(f"{scale}:{encoded}" for scale, encoded in sorted(image.scales().items()))
    return hashlib.sha256(data.encode("utf-8", "surrogatepass")).hexdigest()[:16]
