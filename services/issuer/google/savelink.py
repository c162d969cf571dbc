"""The "Add to Google Wallet" link: https://pay.google.com/gp/v/save/<JWT>.

Fat (class and object inside) when Google cannot have them yet, skinny (references only) when
the REST API stored them first, since long links get truncated by browsers and mail clients.
Claims and sizes: docs/google-wallet.md#the-save-link-fat-and-skinny-jwts.
"""

from datetime import UTC, datetime
from typing import Any, Final

import jwt

from services.issuer.google.identity import GoogleIdentity
from services.issuer.google.objects import VERTICALS

SAVE_URL_PREFIX: Final = "https://pay.google.com/gp/v/save/"


def save_url(
    identity: GoogleIdentity,
    *,
    origins: list[str],
    vertical: str,
    objects: list[dict[str, Any]],
    classes: list[dict[str, Any]] | None = None,
    now: datetime | None = None,
) -> str:
    """Sign a save-to-wallet JWT for `objects` (and `classes`) and return the save link."""
    return SAVE_URL_PREFIX + save_jwt(
        identity, origins=origins, vertical=vertical, objects=objects, classes=classes, now=now
    )


def save_jwt(
    identity: GoogleIdentity,
    *,
    origins: list[str],
    vertical: str,
    objects: list[dict[str, Any]],
    classes: list[dict[str, Any]] | None = None,
    now: datetime | None = None,
) -> str:
    """The signed JWT alone (the last path segment of the save link)."""
    if vertical not in VERTICALS:
        raise ValueError(f"vertical must be one of {VERTICALS}, got {vertical!r}")
    if not objects:
        raise ValueError("a save link needs at least one object")
    payload: dict[str, Any] = {f"{vertical}Objects": objects}
    if classes:
        payload[f"{vertical}Classes"] = classes
    issued = now or datetime.now(UTC)
    claims = {
        "iss": identity.client_email,
        "aud": "google",
        "typ": "savetowallet",
        "iat": int(issued.timestamp()),
        "origins": list(origins),
        "payload": payload,
    }
    return jwt.encode(
        claims, identity.private_key, algorithm="RS256", headers={"kid": identity.private_key_id}
    )


def object_reference(resource: dict[str, Any]) -> dict[str, Any]:
    """The skinny form of an object already inserted through the REST API: its ids only."""
    return {"id": resource["id"], "classId": resource["classId"]}
