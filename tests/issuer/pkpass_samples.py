"""Designs and passes shared by the .pkpass tests: a minimal and a rich design per style."""

import base64
import io
import random
import struct
import zlib
from typing import Any

from PIL import Image

from services.issuer.content import APPLE_STYLES, PassContent
from shared.design import IMAGE_MAX_POINTS, PNG_SIGNATURE, STYLE_IMAGES, Design

TOKEN = "a-very-long-authentication-token"
WEB_SERVICE_URL = "https://passes.example.com/apple"
# The eventTicket shows either a strip, or a background and a thumbnail: both get a sample.
RICH_VARIANTS: tuple[tuple[str, str], ...] = (
    *((style, "rich") for style in APPLE_STYLES),
    ("eventTicket", "rich-background"),
)

LOCALIZATIONS: dict[str, dict[str, str]] = {
    "en": {"Seat": "Seat", "Terms": "Terms"},
    "fr": {
        "Seat": "Place",
        "Terms": 'Conditions "générales"\nVoir au dos \\ merci',
        "Concert ticket": "Billet de concert",
    },
    "pt-BR": {"Seat": "Assento", "Terms": "Termos", "Concert ticket": "Ingresso"},
}


def png(width: int, height: int, rgb: tuple[int, int, int] = (200, 30, 60)) -> bytes:
    """A valid solid-colour RGB PNG of the given size."""
    row = b"\x00" + bytes(rgb) * width
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        PNG_SIGNATURE
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(row * height))
        + chunk(b"IEND", b"")
    )


def noisy_png(width: int, height: int, seed: int = 0) -> bytes:
    """An RGB PNG of random pixels: it does not compress, like a photo (about 3 bytes a pixel)."""
    raw = random.Random(seed).randbytes(width * height * 3)
    out = io.BytesIO()
    Image.frombytes("RGB", (width, height), raw).save(out, format="PNG")
    return out.getvalue()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def png_with(data: bytes, *chunks: tuple[bytes, bytes], after_idat: bool = False) -> bytes:
    """`data` (a PNG) with extra chunks inserted after IHDR, or just before IEND."""
    extra = b"".join(chunk(kind, body) for kind, body in chunks)
    at = len(data) - 12 if after_idat else 33
    return data[:at] + extra + data[at:]


def chunk_types(data: bytes) -> list[bytes]:
    """The chunk types of a PNG, in order."""
    types, offset = [], 8
    while offset < len(data):
        (length,) = struct.unpack(">I", data[offset : offset + 4])
        types.append(data[offset + 4 : offset + 8])
        offset += 12 + length
    return types


def pixels(data: bytes) -> tuple[str, tuple[int, int], bytes, Any]:
    """What a PNG shows: mode, size, pixel bytes and transparency, as Pillow decodes them."""
    with Image.open(io.BytesIO(data)) as image:
        return image.mode, image.size, image.tobytes(), image.info.get("transparency")


def all_scales(image: str) -> dict[str, str]:
    """The image at @1x, @2x and @3x, each at its largest allowed size and a distinct colour."""
    width, height = IMAGE_MAX_POINTS[image]
    return {
        f"x{scale}": b64(png(width * scale, height * scale, (scale * 60, 90, 120)))
        for scale in (1, 2, 3)
    }


def minimal_design(style: str) -> dict[str, Any]:
    return {
        "organization_name": "Tessera",
        "description": "Test pass",
        "fields": [{"key": "seat", "label": "Seat", "slot": "primary"}],
        "barcode": {"format": "qr"},
        "transit_type": "train" if style == "boardingPass" else None,
    }


def rich_design(style: str, variant: str = "rich") -> dict[str, Any]:
    """Every design feature the style allows: all its images at all scales, every barcode
    format, localizations, dates, locations and formatted fields."""
    # The artwork is a poster ticket's (design.event.poster): tests/issuer/test_poster_tickets.py.
    images = {name: all_scales(name) for name in sorted(STYLE_IMAGES[style] - {"artwork"})}
    if style == "eventTicket":
        drop = {"background", "thumbnail"} if variant == "rich" else {"strip"}
        images = {name: image for name, image in images.items() if name not in drop}
    return {
        "organization_name": "Acme Live",
        "description": "Concert ticket",
        "logo_text": "Acme",
        "colors": {"background": "#1A1A2E", "foreground": "#FFFFFF", "label": "#E94560"},
        "fields": [
            {
                "key": "starts",
                "label": "Starts",
                "slot": "header",
                "date_style": "medium",
                "time_style": "short",
                "is_relative": False,
            },
            {"key": "event", "label": "Event", "slot": "primary", "default": "Spring Tour"},
            {"key": "seat", "label": "Seat", "slot": "secondary", "change_message": "Seat %@"},
            {
                "key": "price",
                "label": "Price",
                "slot": "secondary",
                "currency_code": "EUR",
                "default": "42.50",
            },
            {
                "key": "gate",
                "label": "Gate",
                "slot": "auxiliary",
                "text_alignment": "right",
                "default": "A",
            },
            {"key": "share", "label": "Share", "slot": "auxiliary", "number_style": "percent"},
            {
                "key": "terms",
                "label": "Terms",
                "slot": "back",
                "default": 'No re-entry.\n"Quoted" \\ call +1 555 0100',
                "data_detectors": ["phone_number", "link"],
            },
        ],
        "barcodes": [
            {"format": "code128", "message": "{short_id}"},
            {"format": "qr", "message": "{serial_number}", "alt_text": "Show at the door"},
            {"format": "pdf417", "message": "T:{field_values.seat}"},
            {"format": "aztec", "message": "Zoë {serial_number}"},
        ],
        "images": images,
        "transit_type": "air" if style == "boardingPass" else None,
        "localizations": LOCALIZATIONS,
        "expiration_date": "2031-12-31T23:59:00+01:00",
        "relevant_date": "2031-06-01T19:30:00Z",
        "locations": [
            {"latitude": 48.8566, "longitude": 2.3522, "relevant_text": "Welcome to Paris"},
            {"latitude": -33.87, "longitude": 151.21, "altitude": 12.5},
        ],
        "max_distance": 500,
        "grouping_identifier": "tour-2031" if style in ("eventTicket", "boardingPass") else None,
        "suppress_strip_shine": True,
        "sharing_prohibited": False,
    }


def design_for(style: str, variant: str) -> Design:
    data = minimal_design(style) if variant == "minimal" else rich_design(style, variant)
    return Design.model_validate(data)


def content(design: Design | None = None, **overrides: Any) -> PassContent:
    values: dict[str, Any] = {
        "apple_style": "generic",
        "design": design or Design.model_validate(minimal_design("generic")),
        "serial_number": "SER-1",
        "short_id": "abc123",
        "field_values": {},
        "holder_name": None,
        "authentication_token": TOKEN,
        "web_service_url": None,
        "voided": False,
    }
    values.update(overrides)
    return PassContent(**values)


def sample(style: str, variant: str) -> PassContent:
    """A complete pass: field values for the rich designs, a holder, a web service."""
    values = {"seat": "12A"}
    if variant != "minimal":
        values |= {"starts": "2031-06-01T20:00:00+02:00", "share": "0.25"}
    return content(
        design_for(style, variant),
        apple_style=style,
        field_values=values,
        holder_name="Ada Lovelace",
        web_service_url=WEB_SERVICE_URL,
    )


def chunk(kind: bytes, data: bytes) -> bytes:
    crc = zlib.crc32(kind + data) & 0xFFFFFFFF
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)
