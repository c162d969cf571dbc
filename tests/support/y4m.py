"""Y4M videos for Chromium's fake camera (`--use-file-for-fake-video-capture=<file>.y4m`).

Y4M (YUV4MPEG2) is a header line, then for every frame `FRAME` and the raw I420 planes: luma
at full size, then Cb and Cr at half the width and height. Chromium plays the file in a loop at
its frame rate, so a browser test films exactly the pictures the test drew: here, a phone
showing a pass's barcode, then nothing (the phone taken away), then the code again.
"""

import io
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import segno
import zxingcpp
from PIL import Image, ImageDraw

# The barcode formats of a template (shared/design.py BarcodeFormat), as Wallet shows them.
Symbology = Literal["qr", "pdf417", "aztec", "code128"]
_ZXING_FORMATS = {
    "pdf417": zxingcpp.BarcodeFormat.PDF417,
    "aztec": zxingcpp.BarcodeFormat.Aztec,
    "code128": zxingcpp.BarcodeFormat.Code128,
}
_HEADER = re.compile(rb"YUV4MPEG2 W(\d+) H(\d+) F(\d+):(\d+) Ip A1:1 C420jpeg\n")


def write_y4m(path: Path, frames: Sequence[Image.Image], fps: int) -> None:
    """Write `frames` (one size, even width and height) as an I420 Y4M file at `fps`."""
    if not frames:
        raise ValueError("a video needs at least one frame")
    width, height = frames[0].size
    if width % 2 or height % 2:
        raise ValueError(f"I420 needs an even width and height, not {width}x{height}")
    half = (width // 2, height // 2)
    with path.open("wb") as out:
        # C420jpeg: full-range BT.601, which is what Pillow's YCbCr conversion gives.
        out.write(f"YUV4MPEG2 W{width} H{height} F{fps}:1 Ip A1:1 C420jpeg\n".encode())
        for frame in frames:
            if frame.size != (width, height):
                raise ValueError(f"frame of {frame.size}, the video is {width}x{height}")
            luma, cb, cr = frame.convert("RGB").convert("YCbCr").split()
            out.write(b"FRAME\n")
            out.write(luma.tobytes())
            out.write(cb.resize(half, Image.Resampling.BOX).tobytes())
            out.write(cr.resize(half, Image.Resampling.BOX).tobytes())


@dataclass(frozen=True)
class Y4mVideo:
    width: int
    height: int
    fps: float
    # Each frame's three planes, as grayscale images: luma, Cb, Cr.
    frames: list[tuple[Image.Image, Image.Image, Image.Image]]


def read_y4m(path: Path) -> Y4mVideo:
    """Read back a file `write_y4m` wrote (the one header it writes, nothing more general)."""
    data = path.read_bytes()
    header = _HEADER.match(data)
    if header is None:
        raise ValueError("not a Y4M file of write_y4m")
    width, height, rate, scale = (int(value) for value in header.groups())
    chroma = (width // 2, height // 2)
    size = width * height + 2 * chroma[0] * chroma[1]
    frames = []
    offset = header.end()
    while offset < len(data):
        if data[offset : offset + 6] != b"FRAME\n":
            raise ValueError(f"no FRAME marker at byte {offset}")
        planes = data[offset + 6 : offset + 6 + size]
        if len(planes) != size:
            raise ValueError("the last frame is cut short")
        split = (width * height, width * height + chroma[0] * chroma[1])
        frames.append(
            (
                Image.frombytes("L", (width, height), planes[: split[0]]),
                Image.frombytes("L", chroma, planes[split[0] : split[1]]),
                Image.frombytes("L", chroma, planes[split[1] :]),
            )
        )
        offset += 6 + size
    return Y4mVideo(width, height, rate / scale, frames)


def phone_showing(
    message: str | None, symbology: Symbology = "qr", size: tuple[int, int] = (640, 480)
) -> Image.Image:
    """A camera's view of a counter, with a phone whose screen shows `message` in `symbology`
    (black on white with a quiet zone, as Wallet shows it); None: no phone, only the counter."""
    scene = Image.new("RGB", size, (96, 100, 108))
    if message is None:
        return scene
    code = _barcode(message, symbology, (size[0] - 120, size[1] - 160))
    screen = (code.width + 40, code.height + 100)
    phone = Image.new("RGB", (screen[0] + 24, screen[1] + 48), (24, 24, 28))
    ImageDraw.Draw(phone).rectangle(
        (12, 24, 12 + screen[0] - 1, 24 + screen[1] - 1), fill=(255, 255, 255)
    )
    phone.paste(code, (12 + 20, 24 + 30))
    scene.paste(phone, ((size[0] - phone.width) // 2, (size[1] - phone.height) // 2))
    return scene


def _barcode(message: str, symbology: Symbology, room: tuple[int, int]) -> Image.Image:
    """The symbol at the largest whole scale that fits `room` (at least 2 pixels a module)."""
    if symbology == "qr":
        # segno, as the landing page draws QR codes: error correction M, a 4-module quiet zone.
        qr = segno.make(message, error="m", micro=False)
        width, height = qr.symbol_size(border=4)
        scale = max(2, min(room[0] // width, room[1] // height))
        buffer = io.BytesIO()
        qr.save(buffer, kind="png", scale=scale, border=4)
        return Image.open(buffer).convert("RGB")
    symbol = zxingcpp.create_barcode(message, _ZXING_FORMATS[symbology])
    height, width = zxingcpp.write_barcode_to_image(symbol, scale=1).shape
    scale = max(2, min(room[0] // width, room[1] // height))
    return Image.fromarray(zxingcpp.write_barcode_to_image(symbol, scale=scale)).convert("RGB")
