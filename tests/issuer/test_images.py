"""Tests for pass images: PNG checks, cleaning, size limits, scales and the default icon."""

import base64
import io
import struct
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest
from PIL import Image, PngImagePlugin
from pydantic import ValidationError

from services.issuer.images import decode_png, file_name, image_files
from shared.default_icon import default_icon_png
from shared.design import IMAGE_MAX_POINTS, MAX_IMAGE_BYTES, PNG_SIGNATURE, Design
from shared.design_images import check_png, clean_stored_png
from shared.png_clean import KEPT_CHUNKS, MAX_DECODE_PIXELS, clean_png
from tests.issuer.pkpass_samples import (
    all_scales,
    b64,
    chunk,
    chunk_types,
    pixels,
    png,
    png_with,
)

REPO = Path(__file__).resolve().parents[2]
BOMB_INFLATED_BYTES = 200 * 1024 * 1024


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
    [(loc, _)] = _errors({"icon": {"x2": b64(png(58, 58))}})
    assert loc == ("images", "icon", "x1")

    [(loc, _)] = _errors({"icon": {"x1": b64(png(29, 29)), "x4": b64(png(29, 29))}})
    assert loc == ("images", "icon", "x4")


def test_a_string_image_round_trips_as_a_string_and_scales_as_an_object() -> None:
    icon = b64(png(29, 29))
    logo = all_scales("logo")
    design = _design({"icon": icon, "logo": logo})

    dumped = design.model_dump(mode="json")["images"]

    # What is kept is the cleaned PNG: the same pixels, re-encoded.
    assert isinstance(dumped["icon"], str)
    assert pixels(base64.b64decode(dumped["icon"])) == pixels(png(29, 29))
    assert sorted(dumped["logo"]) == ["x1", "x2", "x3"]
    for scale, encoded in logo.items():
        assert pixels(base64.b64decode(dumped["logo"][scale])) == pixels(base64.b64decode(encoded))
    # A cleaned design is its own cleaning.
    assert Design.model_validate(design.model_dump(mode="json")) == design


@pytest.mark.parametrize(
    ("icon", "loc", "message"),
    [
        (png(20, 20), ("images", "icon"), "image 'icon' is 20x20 px; at least 29x29 px"),
        ({"x1": png(29, 29), "x2": png(40, 40)}, ("images", "icon", "x2"), "at least 58x58 px"),
        ({"x1": png(29, 29), "x3": png(86, 87)}, ("images", "icon", "x3"), "at least 87x87 px"),
    ],
    ids=["x1", "x2", "x3"],
)
def test_an_icon_below_29_points_is_refused_naming_the_minimum(
    icon: bytes | dict[str, bytes], loc: tuple[str, ...], message: str
) -> None:
    """Issue 15: Wallet blows a smaller icon up, blurred, on the lock screen."""
    sent = b64(icon) if isinstance(icon, bytes) else {k: b64(v) for k, v in icon.items()}
    [(found_loc, found)] = _errors({"icon": sent})
    assert found_loc == loc
    assert message in found


def test_wrapped_base64_is_accepted() -> None:
    encoded = b64(png(29, 29))
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


def test_decode_png_returns_the_cleaned_bytes() -> None:
    data = png(30, 10)

    assert pixels(decode_png(b64(data), "logo@3x")) == pixels(data)
    custom = decode_png(b64(png(999, 999)), "custom")  # no limit known but the decode budget
    assert pixels(custom) == pixels(png(999, 999))


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
    cleaned = decode_png(b64(data), "icon" if size == 29 else f"icon@{size // 29}x")
    assert pixels(cleaned) == pixels(data)


def test_largest_scale_is_the_sharpest_given() -> None:
    logo = all_scales("logo")
    design = _design({"logo": {"x1": logo["x1"], "x2": logo["x2"]}, "icon": b64(png(29, 29))})

    assert design.images.logo is not None
    sharpest = design.images.logo.x2
    assert sharpest is not None
    assert design.images.logo.largest() == (2, sharpest)
    assert pixels(base64.b64decode(sharpest)) == pixels(base64.b64decode(logo["x2"]))
    assert design.images.icon is not None
    assert design.images.icon.largest()[0] == 1


def test_stored_designs_load_without_decoding_and_oversized_images_still_build() -> None:
    # Saved before pixel limits existed: refused as new input, still usable once stored.
    icon = b64(png(120, 120))
    legacy = {"organization_name": "T", "description": "D", "images": {"icon": icon}}
    with pytest.raises(ValidationError):
        Design.model_validate(legacy)

    design = Design.from_stored(legacy)

    built = image_files(design, "generic")["icon.png"]
    assert pixels(built) == pixels(png(120, 120))
    assert chunk_types(built) == [b"IHDR", b"IDAT", b"IEND"]
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


# Cleaning (shared/png_clean.py): pixel and decompression budgets, ancillary chunks stripped.


def _png_of(width: int, height: int, idat: bytes) -> bytes:
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB
    return PNG_SIGNATURE + chunk(b"IHDR", header) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


def _palette_without_plte() -> bytes:
    """A palette image (colour type 3) without the PLTE chunk it needs: Pillow raised an
    UnboundLocalError for it, which became a 500."""
    header = struct.pack(">IIBBBBB", 4, 4, 8, 3, 0, 0, 0)
    pixels = zlib.compress(b"\0\0\0\0\0" * 4)
    return PNG_SIGNATURE + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


def _inflated_idat(data: bytes) -> bytes:
    idat, offset = b"", 8
    while offset < len(data):
        (length,) = struct.unpack(">I", data[offset : offset + 4])
        if data[offset + 4 : offset + 8] == b"IDAT":
            idat += data[offset + 8 : offset + 8 + length]
        offset += 12 + length
    return zlib.decompress(idat)


def _zeros_compressed(size: int) -> bytes:
    compressor = zlib.compressobj(9)
    block = b"\0" * (2 * 1024 * 1024)
    parts = [compressor.compress(block) for _ in range(size // len(block))]
    return b"".join(parts) + compressor.flush()


@pytest.fixture(scope="module")
def bomb_icon() -> bytes:
    """A 38x38 icon (its largest @1x size) whose IDAT inflates to 200 MB: 200 KB on disk."""
    rows = (b"\0" + bytes((10, 20, 30)) * 38) * 38
    compressor = zlib.compressobj(9)
    head = compressor.compress(rows)
    block = b"\0" * (2 * 1024 * 1024)
    tail = [compressor.compress(block) for _ in range(BOMB_INFLATED_BYTES // len(block))]
    return _png_of(38, 38, head + b"".join(tail) + compressor.flush())


def test_a_decompression_bomb_icon_is_kept_as_its_pixels_only(bomb_icon: bytes) -> None:
    assert len(bomb_icon) < MAX_IMAGE_BYTES

    design = _design({"icon": b64(bomb_icon)})

    assert design.images.icon is not None
    stored = base64.b64decode(design.images.icon.x1)
    assert chunk_types(stored) == [b"IHDR", b"IDAT", b"IEND"]
    # Exactly what 38 rows of 38 RGB pixels need, each row with its filter byte.
    assert len(_inflated_idat(stored)) == 38 * (1 + 38 * 3)
    assert pixels(stored)[2] == bytes((10, 20, 30)) * 38 * 38
    assert len(stored) < 1000


def test_cleaning_bombs_costs_no_memory_beyond_the_pixels(bomb_icon: bytes, tmp_path: Path) -> None:
    # The IDAT bomb, plus a zTXt chunk that inflates to 50 MB, measured in a fresh process:
    # its peak resident size is not shared with the rest of the test run.
    path = tmp_path / "bombs.png"
    text = b"Comment\0\0" + _zeros_compressed(50 * 1024 * 1024)
    path.write_bytes(png_with(bomb_icon, (b"zTXt", text)))
    script = (
        "import base64, resource, sys\n"
        "from shared.design_images import check_png\n"
        "encoded = base64.b64encode(open(sys.argv[1], 'rb').read()).decode()\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "clean = check_png(encoded, 'icon', 1)\n"
        "grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before\n"
        "print(grown, len(clean.data))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", script, str(path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    grown_kib, cleaned_bytes = map(int, run.stdout.split())

    assert grown_kib < 16 * 1024  # ru_maxrss is in KiB on Linux; 250 MB if anything inflated
    assert cleaned_bytes < 1000


def test_an_oversized_ihdr_is_refused_before_anything_is_decoded() -> None:
    # The IDAT is not even zlib: decoding it would fail with another message.
    huge = _png_of(100_000, 100_000, b"not zlib at all")

    [(loc, msg)] = _errors({"icon": b64(huge)})
    assert loc == ("images", "icon")
    assert "image 'icon' is 100000x100000 px; at most 38x38 px" in msg

    # A stored design (no per-image limit) still gets the decode budget.
    with pytest.raises(ValueError, match=f"at most {MAX_DECODE_PIXELS} pixels are decoded"):
        clean_stored_png(b64(huge), "icon.png")
    with pytest.raises(ValueError, match="at most 100 pixels are decoded"):
        clean_png(png(11, 10), max_pixels=100)


def _pillow_png(image: Image.Image, **options: Any) -> bytes:
    info = PngImagePlugin.PngInfo()
    info.add_text("Comment", "<script>alert(1)</script>")
    info.add_text("XML:com.adobe.xmp", "<x:xmpmeta/>" * 50, zip=True)
    out = io.BytesIO()
    image.save(out, format="PNG", pnginfo=info, **options)
    return out.getvalue()


def _palette_with_transparency() -> bytes:
    image = Image.new("P", (20, 10))
    image.putpalette([0, 0, 0, 255, 0, 0, 0, 255, 0])
    image.putdata([(x + y) % 3 for y in range(10) for x in range(20)])
    return _pillow_png(image, transparency=1)


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(lambda: _palette_with_transparency(), id="palette-trns"),
        pytest.param(lambda: _pillow_png(Image.new("RGBA", (9, 7), (1, 2, 3, 40))), id="rgba"),
        pytest.param(lambda: _pillow_png(Image.new("LA", (9, 7), (90, 128))), id="gray-alpha"),
        pytest.param(lambda: _pillow_png(Image.new("1", (9, 7), 1)), id="bilevel"),
        pytest.param(lambda: _pillow_png(Image.new("I;16", (9, 7), 40_000)), id="gray16"),
        pytest.param(
            lambda: _pillow_png(Image.new("RGB", (9, 7), (5, 6, 7)), transparency=(5, 6, 7)),
            id="rgb-trns",
        ),
        pytest.param(
            lambda: _pillow_png(Image.new("RGB", (9, 7), (5, 6, 7)), icc_profile=b"\0" * 200),
            id="icc",
        ),
    ],
)
def test_cleaning_keeps_mode_pixels_and_transparency(source: Any) -> None:
    original = source()
    assert {b"tEXt", b"zTXt"} & set(chunk_types(original))

    cleaned = clean_png(original)

    assert set(chunk_types(cleaned)) <= KEPT_CHUNKS
    assert pixels(cleaned) == pixels(original)
    assert b"<script>" not in cleaned
    assert clean_png(cleaned) == cleaned  # a cleaned image is its own cleaning


def test_every_ancillary_chunk_goes_wherever_it_is() -> None:
    ancillary = (
        (b"tIME", b"\x07\xe9\x01\x01\x00\x00\x00"),
        (b"eXIf", b"MM\x00*\x00\x00\x00\x08\x00\x00"),
        (b"gAMA", struct.pack(">I", 45455)),
        (b"acTL", struct.pack(">II", 1, 0)),
        (b"prVt", b"private"),
    )
    data = png_with(png_with(png(8, 8), *ancillary), (b"tEXt", b"k\0<b>late</b>"), after_idat=True)

    cleaned = clean_png(data)

    assert chunk_types(cleaned) == [b"IHDR", b"IDAT", b"IEND"]
    assert pixels(cleaned) == pixels(png(8, 8))


def _with_bad_idat_crc(data: bytes) -> bytes:
    crc_at = len(data) - 12 - 4
    return data[:crc_at] + bytes([data[crc_at] ^ 0xFF]) + data[crc_at + 1 :]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (png_with(png(4, 4), (b"ABCD", b"x")), "unknown chunk ABCD"),
        (png_with(png(4, 4), (b"t3Xt", b"x")), "a chunk type is not four letters"),
        (_with_bad_idat_crc(png(4, 4)), "IDAT checksum mismatch"),
        (_png_of(4, 4, b"not zlib at all"), "could not be decoded as a PNG"),
        (_png_of(4, 4, zlib.compress(b"\0" * 20)), "could not be decoded as a PNG"),
        (png(4, 4)[:-12], "no IEND chunk"),
        (_palette_without_plte(), "could not be decoded as a PNG"),
    ],
    ids=[
        "unknown-critical",
        "bad-type",
        "idat-crc",
        "not-zlib",
        "too-few-pixels",
        "no-iend",
        "palette-without-plte",
    ],
)
def test_a_png_that_does_not_decode_is_refused(data: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        clean_png(data)
    with pytest.raises(ValueError, match=f"image 'logo@2x' .*{message}"):
        check_png(b64(data), "logo", 2)


def _keyed(depth: int, colour_type: int, rows: list[bytes], key: bytes) -> bytes:
    """A PNG written at `depth` with a tRNS colour key, as other encoders write them (Pillow
    never writes these)."""
    width = len(rows[0]) * 8 // (depth * (3 if colour_type == 2 else 1))
    header = struct.pack(">IIBBBBB", width, len(rows), depth, colour_type, 0, 0, 0)
    idat = zlib.compress(b"".join(b"\0" + row for row in rows))
    return (
        PNG_SIGNATURE
        + chunk(b"IHDR", header)
        + chunk(b"tRNS", key)
        + chunk(b"IDAT", idat)
        + chunk(b"IEND", b"")
    )


@pytest.mark.parametrize(
    ("original", "alpha"),
    [
        # 2-bit grey 0,1,2,3 with the key 1: the second pixel is transparent.
        pytest.param(_keyed(2, 0, [bytes([0b00011011])], b"\0\1"), [255, 0, 255, 255], id="g2"),
        pytest.param(_keyed(4, 0, [bytes([0x05])], b"\0\5"), [255, 0], id="g4"),
        pytest.param(_keyed(1, 0, [bytes([0b01000000])], b"\0\1"), [255, 0] + [255] * 6, id="g1"),
        pytest.param(
            _keyed(
                16,
                2,
                [struct.pack(">6H", 0x1234, 0x5678, 0x9ABC, 0, 0, 0)],
                struct.pack(">3H", 0x1234, 0x5678, 0x9ABC),
            ),
            [0, 255],
            id="rgb16",
        ),
    ],
)
def test_cleaning_keeps_the_colour_key_of_grey_below_8_bits_and_rgb_of_16(
    original: bytes, alpha: list[int]
) -> None:
    """Pillow reads these at 8 bits but keeps the key at the file's depth: re-encoded, the key
    matched no pixel and the image lost its transparency (Wallet shows the file we store)."""
    cleaned_bytes = clean_png(original)
    if original[24:26] == b"\x01\x00":  # 1-bit grey stays 1-bit: its key is 0 or 1
        key_at = cleaned_bytes.index(b"tRNS") + 4
        assert cleaned_bytes[key_at : key_at + 2] == b"\x00\x01"
    with Image.open(io.BytesIO(cleaned_bytes)) as cleaned:
        rgba = cleaned.convert("RGBA")
        assert [rgba.getpixel((x, 0))[3] for x in range(cleaned.width)] == alpha  # type: ignore[index]
