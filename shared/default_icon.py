"""The icon of a pass whose design has none, and the placeholder logo Google requires.

A solid-colour square PNG built by hand (a few bytes of IHDR, IDAT, IEND): the issuer puts it in
every .pkpass without an icon and the api serves it as the placeholder logo of loyalty classes.
"""

import functools
import struct
import zlib

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_RGB = (0x4A, 0x5A, 0x6A)


@functools.cache
def default_icon_png(size: int) -> bytes:
    """A solid-colour square PNG of `size` pixels."""
    row = b"\x00" + bytes(_RGB) * size  # filter byte 0 (None) + RGB pixels
    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)  # 8-bit truecolour
    return (
        PNG_SIGNATURE
        + _png_chunk(b"IHDR", header)
        + _png_chunk(b"IDAT", zlib.compress(row * size, 9))
        + _png_chunk(b"IEND", b"")
    )


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    crc = zlib.crc32(kind + data) & 0xFFFFFFFF
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)
