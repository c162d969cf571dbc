"""Clean a PNG before it is stored or served: decode it under budgets, re-encode only its pixels.

1. Chunks: only IHDR, PLTE, tRNS (transparency), IDAT and IEND are kept. Every other chunk
   (tEXt/zTXt/iTXt text, tIME, eXIf, iCCP, gAMA, APNG frames, private chunks) is dropped
   *before* anything is decoded, so a compressed text chunk is never inflated. An unknown
   critical chunk is refused, as the PNG specification asks of a decoder.
2. Pixels: width x height from IHDR is checked against the caller's budget before decoding;
   the size Pillow parsed is checked again (the second wall), and Pillow's own
   DecompressionBombError is a third.
3. Decompression: Pillow inflates IDAT only as far as the pixels need, so a small image whose
   IDAT would inflate to hundreds of megabytes costs no more than its pixels.
4. Re-encoding: the pixels are written as a new PNG (same mode, transparency kept), and the
   result goes through step 1 again, so nothing Pillow might add survives.
"""

import io
import struct
import zlib

from PIL import Image

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
KEPT_CHUNKS = frozenset({b"IHDR", b"PLTE", b"tRNS", b"IDAT", b"IEND"})
# The most pixels decoded for any image, whatever its name: four times the largest Wallet image
# (strip@3x, 1125x432 px), so that a template stored before the per-image limits still builds.
# Decoded as RGBA that is 16 MB at most.
MAX_DECODE_PIXELS = 2000 * 2000
# What Pillow may raise on a corrupt or truncated stream (its own ValueErrors included).
_DECODE_ERRORS = (OSError, ValueError, SyntaxError, EOFError, struct.error)


def critical_chunks(data: bytes) -> bytes:
    """`data` with only the chunks in KEPT_CHUNKS, each checked against its CRC."""
    if not data.startswith(PNG_SIGNATURE):
        raise ValueError("is not a PNG (bad signature)")
    view = memoryview(data)
    kept: list[bytes | memoryview] = [PNG_SIGNATURE]
    offset = len(PNG_SIGNATURE)
    kind = b""
    while kind != b"IEND":
        if offset + 12 > len(data):
            raise ValueError("is not a complete PNG (no IEND chunk)")
        length, kind = struct.unpack(">I4s", view[offset : offset + 8])
        end = offset + 12 + length
        if end > len(data):
            raise ValueError("is not a complete PNG (a chunk runs past the end)")
        if not kind.isalpha():
            raise ValueError("is not a PNG (a chunk type is not four letters)")
        if kind in KEPT_CHUNKS:
            (crc,) = struct.unpack(">I", view[end - 4 : end])
            if zlib.crc32(view[offset + 8 : end - 4], zlib.crc32(kind)) != crc:
                raise ValueError(f"is not a PNG ({kind.decode()} checksum mismatch)")
            kept.append(view[offset:end])
        elif kind[0] & 0x20 == 0:  # an upper-case first letter marks a critical chunk
            raise ValueError(f"is not a PNG Wallet can show (unknown chunk {kind.decode()})")
        offset = end
    if kept[1][4:8] != b"IHDR":
        raise ValueError("is not a PNG (no IHDR chunk)")
    return b"".join(kept)


def clean_png(data: bytes, max_pixels: int = MAX_DECODE_PIXELS) -> bytes:
    """Re-encode the pixels of `data` as a PNG with no ancillary chunks but tRNS.

    Raises ValueError, with a message that reads after "image 'logo' ...", when `data` is not
    a PNG, has more than `max_pixels` pixels, or does not decode.
    """
    stripped = critical_chunks(data)
    width, height = struct.unpack(">II", stripped[16:24])
    _check_pixels(width, height, max_pixels)
    try:
        image = Image.open(io.BytesIO(stripped), formats=["PNG"])
    except (*_DECODE_ERRORS, Image.DecompressionBombError) as exc:
        raise ValueError(f"could not be decoded as a PNG ({exc})") from exc
    with image:
        _check_pixels(image.width, image.height, max_pixels)
        try:
            image.load()
            _scale_colour_key(image, depth=stripped[24], colour_type=stripped[25])
            encoded = io.BytesIO()
            image.save(encoded, format="PNG")
        except Exception as exc:
            # Untrusted bytes: Pillow raises more than its documented errors on some malformed
            # streams (an UnboundLocalError for a palette image without its PLTE chunk).
            raise ValueError(f"could not be decoded as a PNG ({type(exc).__name__})") from exc
    return critical_chunks(encoded.getvalue())


def _scale_colour_key(image: Image.Image, depth: int, colour_type: int) -> None:
    """Pillow widens 2/4-bit grey to 8 bits and narrows 16-bit RGB to 8 bits, but keeps the
    tRNS colour key as written, at the file's depth (1-bit grey stays 1-bit, its key read as 0
    or 255): the key then matches no pixel and the transparency was lost in the re-encoded
    file. The key is brought to the pixels' depth (for 16-bit RGB by its high bytes, as Pillow
    narrows the pixels: a colour within 1/256 of the key becomes transparent with it)."""
    key = image.info.get("transparency")
    if key is None:
        return
    if colour_type == 0 and depth == 1 and isinstance(key, int):
        # Read as mode "1" (0 or 255, the key read as one of them), written back at 1 bit,
        # where the key must be 0 or 1 (Pillow wrote 255, which matches no 1-bit pixel).
        image.info["transparency"] = 1 if key else 0
    elif colour_type == 0 and depth < 8 and isinstance(key, int):
        image.info["transparency"] = key * (255 // (2**depth - 1))
    elif colour_type == 2 and depth == 16 and isinstance(key, tuple):
        image.info["transparency"] = tuple(value >> 8 for value in key)


def _check_pixels(width: int, height: int, max_pixels: int) -> None:
    if width == 0 or height == 0:
        raise ValueError("is not a PNG (zero width or height)")
    if width * height > max_pixels:
        raise ValueError(f"is {width}x{height} px; at most {max_pixels} pixels are decoded")
