"""What a barcode can carry: a message Wallet (or a scanner) cannot draw or read is refused with
a 400 when the template is saved (its fixed text) and when a pass is made or changed (its
values), instead of a pass whose barcode does not show.

The limits are the encoders' (Zint, ZXing) binary capacities at the error correction Wallet
uses, rounded down, in the bytes of the message's encoding (ISO-8859-1 when it fits, else UTF-8,
as pass.json says: services/issuer/passjson.py), and Code 128 carries ISO-8859-1 only. Each
is below the 2,048 characters a scan's `code` may hold (shared/scans.py), so every pass can be
scanned by its code.
"""

import re
from typing import Final, NamedTuple

from shared.design import BARCODE_PLACEHOLDER, Barcode, Design

MAX_MESSAGE_BYTES: Final = {"qr": 1600, "aztec": 1500, "pdf417": 1000, "code128": 256}
# The longest a pass's own identifiers are: a UUID serial number, a 16-character short id.
_IDENTIFIER_CHARS: Final = {"serial_number": 36, "short_id": 16}


class BarcodeProblem(NamedTuple):
    where: str  # the barcode's path under `design`
    message: str  # what is wrong
    barcode: Barcode


def barcode_problem(design: Design, field_values: dict[str, str]) -> BarcodeProblem | None:
    """The first barcode whose message, with these values, its format cannot carry; None when
    every one fits."""
    for index, barcode in enumerate(design.barcode_list()):
        message = _expanded(barcode.message, field_values)
        where = design.barcode_path(index)
        if barcode.format == "code128":
            try:
                message.encode("iso-8859-1")
            except UnicodeEncodeError:
                why = "Code 128 carries Latin-1 text only (ISO-8859-1)"
                return BarcodeProblem(where, why, barcode)
        size = _size(message)
        limit = MAX_MESSAGE_BYTES[barcode.format]
        if size > limit:
            why = f"the message is {size} bytes; a {barcode.format} barcode carries at most {limit}"
            return BarcodeProblem(where, why, barcode)
    return None


def _expanded(template: str, field_values: dict[str, str]) -> str:
    def value(match: re.Match[str]) -> str:
        name, key = match.group(1), match.group(2)
        if key is not None:
            return field_values.get(key, "")
        return "x" * _IDENTIFIER_CHARS[name]

    return BARCODE_PLACEHOLDER.sub(value, template)


def _size(message: str) -> int:
    try:
        return len(message.encode("iso-8859-1"))
    except UnicodeEncodeError:
        return len(message.encode("utf-8"))
