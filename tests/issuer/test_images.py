"""Tests for pass images: PNG checks, size limits, scales and the default icon."""

import struct
import zlib
from typing import Any

import pytest
from pydantic import ValidationError

from services.issuer.images import decode_png, default_icon_png, file_name, image_files
from shared.design import IMAGE_MAX_POINTS, MAX_IMAGE_BYTES, Design
from tests.issuer.pkpass_samples import all_scales, b64, png


def _design(images: dict[str, Any]) -> Design:
    return Design.model_validate({"organization_name": "T", "description": "D", "images": images})


def _errors(images: dict[str, Any]) -> list[tuple[tuple[int | str, ...], str]]:
    with pytest.raises(ValidationError) as caught:
        _design(images)
    return [(error["loc"], error["msg"]) for error in caught.value.errors()]


def _truncated(data: bytes) -> bytes:
    return data[:-12]


def _bad_ihdr_crc(data: bytes) -> bytes:
    return data[:29] + bytes([data[29] ^ 0xFF]) + data[30:]


def _zero_width(data: bytes) -> bytes:
    body = struct.pack(">IIBBBBB", 0, 1, 8, 2, 0, 0, 0)
    chunk = b"IHDR" + body
    return data[:12] + chunk + struct.pack(">I", zlib.crc32(chunk) & 0xFFFFFFFF) + data[33:]


@pytest.mark.parametrize(
    ("encoded", "message"),
    [
        ("not base64!!", "is not valid base64"),
        (b64(b"GIF89a" + b"\0" * 40), "is not a PNG (bad signature)"),
        (b64(b"\x89PNG\r\n\x1a\n" + b"\0" * 30), "is not a PNG (no IHDR chunk)"),
        (b64(_bad_ihdr_crc(png(4, 4))), "is not a PNG (IHDR checksum mismatch)"),
        (b64(_zero_width(png(4, 4))), "is not a PNG (zero width or height)"),
        (b64(_truncated(png(4, 4))), "is not a complete PNG (no IEND chunk at the end)"),
    ],
    ids=["base64", "signature", "ihdr", "ihdr-crc", "zero-width", "truncated"],
)
def test_invalid_png_is_refused_with_its_path(encoded: str, message: str) -> None:
    [(as_string, string_message)] = _errors({"logo": encoded})
    [(as_scale, scale_message)] = _errors({"logo": {"x1": b64(png(5, 5)), "x3": encoded}})

    assert as_string == ("images", "logo")
    assert f"image 'logo' {message}" in string_message
    assert as_scale == ("images", "logo", "x3")
    assert f"image 'logo@3x' {message}" in scale_message


@pytest.mark.parametrize("image", sorted(IMAGE_MAX_POINTS))
def test_largest_allowed_size_at_each_scale_is_accepted(image: str) -> None:
    design = _design({image: all_scales(image)})

    scales = design.images.given()[image].scales()
    assert sorted(scales) == [1, 2, 3]


@pytest.mark.parametrize("image", sorted(IMAGE_MAX_POINTS))
@pytest.mark.parametrize(("scale", "label"), [(1, ""), (2, "@2x"), (3, "@3x")])
def test_one_pixel_too_wide_or_high_is_refused(image: str, scale: int, label: str) -> None:
    width, height = IMAGE_MAX_POINTS[image]
    images = all_scales(image)
    for too_big in (png(width * scale + 1, height), png(width, height * scale + 1)):
        images[f"x{scale}"] = b64(too_big)
        [(loc, msg)] = _errors({image: images})

        assert loc == ("images", image, f"x{scale}")
        assert f"image '{image}{label}' is " in msg
        assert f"at most {width * scale}x{height * scale} px" in msg


def test_byte_limit() -> None:
    # A 1x1 PNG padded with an ancillary chunk past the limit is refused before anything else.
    base = png(1, 1)
    padding = b"\0" * MAX_IMAGE_BYTES
    chunk = b"tEXt" + padding
    crc = struct.pack(">I", zlib.crc32(chunk) & 0xFFFFFFFF)
    oversized = base[:33] + struct.pack(">I", len(padding)) + chunk + crc + base[33:]

    [(loc, msg)] = _errors({"icon": b64(oversized)})

    assert loc == ("images", "icon")
    assert f"at most {MAX_IMAGE_BYTES} bytes" in msg


def test_scales_object_needs_x1_and_nothing_else() -> None:
    [(loc, _)] = _errors({"icon": {"x2": b64(png(10, 10))}})
    assert loc == ("images", "icon", "x1")

    [(loc, _)] = _errors({"icon": {"x1": b64(png(10, 10)), "x4": b64(png(10, 10))}})
    assert loc == ("images", "icon", "x4")


def test_a_string_image_round_trips_as_a_string_and_scales_as_an_object() -> None:
    icon = b64(png(29, 29))
    logo = all_scales("logo")
    design = _design({"icon": icon, "logo": logo})

    dumped = design.model_dump(mode="json")["images"]

    assert dumped["icon"] == icon
    assert dumped["logo"] == logo
    assert Design.model_validate(design.model_dump(mode="json")) == design


def test_wrapped_base64_is_accepted() -> None:
    encoded = b64(png(20, 20))
    wrapped = "\n".join(encoded[i : i + 16] for i in range(0, len(encoded), 16))

    assert _design({"icon": wrapped}).images.icon is not None


def test_image_files_names_every_scale_of_allowed_images() -> None:
    design = _design({"icon": all_scales("icon"), "strip": {"x1": all_scales("strip")["x1"]}})

    assert list(image_files(design, "coupon")) == [
        "icon.png",
        "icon@2x.png",
        "icon@3x.png",
        "strip.png",
    ]
    assert list(image_files(design, "generic")) == ["icon.png", "icon@2x.png", "icon@3x.png"]
    assert file_name("thumbnail", 3) == "thumbnail@3x.png"


@pytest.mark.parametrize(
    ("name", "data", "fragment"),
    [
        ("icon", png(39, 39), "image 'icon' is 39x39 px; at most 38x38 px"),
        ("icon@2x", png(77, 10), "image 'icon@2x' is 77x10 px; at most 76x76 px"),
        ("logo", b"GIF89a", "image 'logo' is not a PNG"),
    ],
    ids=["icon", "icon@2x", "logo"],
)
def test_decode_png_labels_errors(name: str, data: bytes, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        decode_png(b64(data), name)


def test_decode_png_returns_the_bytes() -> None:
    data = png(30, 10)

    assert decode_png(b64(data), "logo@3x") == data
    assert decode_png(b64(png(999, 999)), "custom") == png(999, 999)  # no limit known


@pytest.mark.parametrize("size", [29, 58, 87])
def test_default_icon_is_valid_png(size: int) -> None:
    data = default_icon_png(size)
    assert data.startswith(b"\x89PNG\r\n\x1a\n")

    chunks: dict[bytes, bytes] = {}
    offset = 8
    while offset < len(data):
        (length,) = struct.unpack(">I", data[offset : offset + 4])
        kind = data[offset + 4 : offset + 8]
        body = data[offset + 8 : offset + 8 + length]
        (crc,) = struct.unpack(">I", data[offset + 8 + length : offset + 12 + length])
        assert crc == zlib.crc32(kind + body) & 0xFFFFFFFF
        chunks[kind] = body
        offset += 12 + length

    width, height, depth, color_type = struct.unpack(">IIBB", chunks[b"IHDR"][:10])
    assert (width, height, depth, color_type) == (size, size, 8, 2)
    assert len(zlib.decompress(chunks[b"IDAT"])) == size * (1 + 3 * size)
    assert b"IEND" in chunks
    assert default_icon_png(size) is data  # cached, generated once
    assert decode_png(b64(data), "icon" if size == 29 else f"icon@{size // 29}x") == data


def test_largest_scale_is_the_sharpest_given() -> None:
    logo = all_scales("logo")
    design = _design({"logo": {"x1": logo["x1"], "x2": logo["x2"]}, "icon": b64(png(29, 29))})

    assert design.images.logo is not None
    assert design.images.logo.largest() == (2, logo["x2"])
    assert design.images.icon is not None
    assert design.images.icon.largest()[0] == 1


def test_stored_designs_load_without_decoding_and_oversized_images_still_build() -> None:
    # Saved before pixel limits existed: refused as new input, still usable once stored.
    icon = b64(png(120, 120))
    legacy = {"organization_name": "T", "description": "D", "images": {"icon": icon}}
    with pytest.raises(ValidationError):
        Design.model_validate(legacy)

    design = Design.from_stored(legacy)

    assert image_files(design, "generic")["icon.png"] == png(120, 120)
    assert design.model_dump(mode="json")["images"]["icon"] == icon


def test_a_stored_image_that_is_not_a_png_fails_the_build_with_its_file_name() -> None:
    design = Design.from_stored(
        {
            "organization_name": "T",
            "description": "D",
            "images": {"logo": {"x1": b64(png(9, 9)), "x2": "@@"}},
        }
    )

    with pytest.raises(ValueError, match=r"image 'logo@2x\.png' is not valid base64"):
        image_files(design, "generic")
