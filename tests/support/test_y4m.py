"""tests/support/y4m.py: the Y4M files the scanner page's fake camera plays."""

from pathlib import Path

import pytest
import zxingcpp
from PIL import Image

from tests.support.y4m import Symbology, phone_showing, read_y4m, write_y4m

MESSAGE = "7f9c2ba4-e88f-4d7a-9a53-3d1b0f6a2c11"


def test_a_written_video_reads_back_frame_by_frame(tmp_path: Path) -> None:
    path = tmp_path / "camera.y4m"
    frames = [phone_showing(MESSAGE), phone_showing(None)]
    write_y4m(path, frames, fps=5)

    assert path.read_bytes().startswith(b"YUV4MPEG2 W640 H480 F5:1 Ip A1:1 C420jpeg\nFRAME\n")
    # Header, then per frame the marker and 1.5 bytes a pixel (I420).
    assert path.stat().st_size == 42 + 2 * (6 + 640 * 480 * 3 // 2)
    video = read_y4m(path)
    assert (video.width, video.height, video.fps, len(video.frames)) == (640, 480, 5.0, 2)

    luma, cb, cr = video.frames[0]
    assert (luma.size, cb.size, cr.size) == ((640, 480), (320, 240), (320, 240))
    # The QR code survives the conversion: it is read from the luma plane alone.
    assert [found.text for found in zxingcpp.read_barcodes(luma)] == [MESSAGE]
    # Colours come back: the planes merged and converted give the scene's pixels again.
    blank = video.frames[1]
    full = [blank[0]] + [plane.resize((640, 480)) for plane in blank[1:]]
    back = Image.merge("YCbCr", full).convert("RGB")
    for point in ((0, 0), (320, 240), (639, 479)):
        expected = frames[1].getpixel(point)
        assert isinstance(expected, tuple)
        got = back.getpixel(point)
        assert isinstance(got, tuple)
        assert all(abs(a - b) <= 2 for a, b in zip(got, expected, strict=True)), (got, expected)
    assert zxingcpp.read_barcodes(blank[0]) == []


@pytest.mark.parametrize(
    ("symbology", "zxing_format", "message"),
    [
        ("qr", "QRCode", MESSAGE),
        ("pdf417", "PDF417", MESSAGE),
        ("aztec", "Aztec", MESSAGE),
        ("code128", "Code128", "AbCdEfGh12345678"),
    ],
)
def test_every_wallet_barcode_format_is_filmed_readably(
    tmp_path: Path, symbology: Symbology, zxing_format: str, message: str
) -> None:
    write_y4m(tmp_path / "camera.y4m", [phone_showing(message, symbology)], fps=1)
    luma = read_y4m(tmp_path / "camera.y4m").frames[0][0]
    found = zxingcpp.read_barcodes(luma)
    assert [(code.text, code.format.name) for code in found] == [(message, zxing_format)]


def test_luma_is_full_range(tmp_path: Path) -> None:
    """The header says C420jpeg (full range): black is 0 and white 255, not video range 16-235."""
    picture = Image.new("RGB", (4, 2), (255, 255, 255))
    picture.paste((0, 0, 0), (0, 0, 2, 2))
    write_y4m(tmp_path / "bw.y4m", [picture], fps=1)
    luma, cb, cr = read_y4m(tmp_path / "bw.y4m").frames[0]
    assert luma.tobytes() == bytes([0, 0, 255, 255, 0, 0, 255, 255])
    assert cb.tobytes() == cr.tobytes() == bytes([128, 128])


def test_odd_sizes_and_mixed_frames_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="even width and height"):
        write_y4m(tmp_path / "odd.y4m", [Image.new("RGB", (641, 480))], fps=5)
    with pytest.raises(ValueError, match="the video is 640x480"):
        write_y4m(
            tmp_path / "mixed.y4m", [Image.new("RGB", (640, 480)), Image.new("RGB", (320, 240))], 5
        )
    with pytest.raises(ValueError, match="at least one frame"):
        write_y4m(tmp_path / "empty.y4m", [], fps=5)
