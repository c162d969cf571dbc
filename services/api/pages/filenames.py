"""The download's file name, after the organization (docs/pages.md): an ASCII slug in
`filename` for every client, and for a name that is not ASCII the name itself, UTF-8, in
RFC 6266's `filename*`, which browsers and iOS prefer (`Café Müller.pkpass`, `東京ドーム.pkpass`,
where the slug alone said `caf-m-ller` and `pass`)."""

import re
import unicodedata
from urllib.parse import quote

from shared.design import Design
from shared.models import TemplateRecord

MAX_NAME_CHARS = 60
# What no file system or browser keeps in a file name, and the characters that are not text.
_UNSAFE = re.compile(r'[\\/:*?"<>|]+')


def attachment(template: TemplateRecord, extension: str, fallback: str) -> str:
    """The Content-Disposition of a download named after the template's organization."""
    name = Design.from_stored(template.design).organization_name
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:MAX_NAME_CHARS].strip("-")
    disposition = f'attachment; filename="{slug or fallback}.{extension}"'
    visible = "".join(c for c in name if unicodedata.category(c)[0] not in "CZ" or c == " ")
    full = _UNSAFE.sub("-", visible).strip(" .-")[:MAX_NAME_CHARS].strip()
    if full and not full.isascii():
        disposition += f"; filename*=UTF-8''{quote(f'{full}.{extension}', safe='')}"
    return disposition
