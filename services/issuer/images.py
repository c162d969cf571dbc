"""The PNG files of a .pkpass: the design's images at their scales, and the default icon.

Images are validated and cleaned when a design is received (shared.design_images.check_png:
base64, PNG signature, IHDR, IEND, byte and pixel limits, then decoded and re-encoded without
ancillary chunks). Here they are cleaned again, from a cache, since a design saved before
cleaning existed may still hold raw images, and named as Wallet looks them up: `<name>.png`,
`<name>@2x.png`, `<name>@3x.png`.
"""

import re

from shared.default_icon import default_icon_png
from shared.design import Design
from shared.design_images import STYLE_IMAGES, check_png, clean_stored_png

DEFAULT_ICON_POINTS = 29  # Apple's classic icon size; the default icon is 29, 58 and 87 px.
_SCALED_NAME = re.compile(r"^(?P<image>[a-z]+)(?:@(?P<scale>[23])x)?$")


def decode_png(encoded: str, name: str) -> bytes:
    """Decode, check and clean a base64 PNG; `name` ("icon", "logo@2x", ...) labels the error.

    For a known image name the pixel limits of that image and scale apply as well.
    """
    match = _SCALED_NAME.match(name)
    if match is None:
        return check_png(encoded, name, 1).data
    return check_png(encoded, match["image"], int(match["scale"] or 1)).data


def image_files(design: Design, apple_style: str) -> dict[str, bytes]:
    """Every image file of the pass, by file name; the icon is always there.

    Images the style does not show are left out (templates are checked for them when saved).
    Every image is cleaned (clean_stored_png: the decode budget, not the image's own pixel
    limit, since Wallet scales a larger image down and a template saved before the limits
    existed must still issue passes). Raises ValueError naming the file of an image that fails.
    """
    allowed = STYLE_IMAGES[apple_style]
    files: dict[str, bytes] = {}
    given = design.images.given()
    if "icon" not in given:
        for scale in (1, 2, 3):
            files[file_name("icon", scale)] = default_icon_png(DEFAULT_ICON_POINTS * scale)
    for name, image in given.items():
        if name not in allowed:
            continue
        for scale, encoded in image.scales().items():
            label = file_name(name, scale)
            files[label] = clean_stored_png(encoded, label).data
    return files


def file_name(image: str, scale: int) -> str:
    return f"{image}.png" if scale == 1 else f"{image}@{scale}x.png"
