"""How Tessera names its Google Wallet resources: `<issuer id>.<template id>` for a class and
`<issuer id>.<pass id>` for an object. The issuer makes them; the events service reads a pass id
back out of a callback's object id."""

import re
from typing import Final

from shared.ids import has_prefix

# The issuer id of the development Google identity (no real issuer account behind it).
DEV_ISSUER_ID: Final = "3388000000000000000"
_ID_SUFFIX = re.compile(r"^[A-Za-z0-9._-]+$")


def class_id(issuer_id: str, template_id: str) -> str:
    """`<issuer id>.<template id>`: one class per template, stable for its lifetime."""
    return f"{issuer_id}.{_suffix(template_id)}"


def object_id(issuer_id: str, pass_id: str) -> str:
    """`<issuer id>.<pass id>`: one object per pass, stable for its lifetime."""
    return f"{issuer_id}.{_suffix(pass_id)}"


def pass_id_of(issuer_id: str, resource_id: str) -> str | None:
    """The pass id of an object id made by `object_id`; None when it is not one of ours."""
    prefix = f"{issuer_id}."
    if not resource_id.startswith(prefix):
        return None
    pass_id = resource_id[len(prefix) :]
    return pass_id if has_prefix(pass_id, "pass") else None


def _suffix(value: str) -> str:
    # Wallet ids allow only these characters; Tessera's ids (`tmpl_...`, `pass_...`) conform,
    # so anything else is a caller's bug rather than something to rewrite silently.
    if not _ID_SUFFIX.match(value):
        raise ValueError(f"{value!r} is not usable in a Wallet id (A-Z a-z 0-9 . _ - only)")
    return value
