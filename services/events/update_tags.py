"""The update tags of Apple's web service: `lastUpdated` / `passesUpdatedSince`, Last-Modified.

`lastUpdated` is opaque to the device, which hands it back as `passesUpdatedSince`. What a tag
stands for is the version of every pass the device had registered (of that pass type) when it
got the tag, each serial number shortened to a 48-bit digest: `v1.<digest>-<version>~...`
(`encode_tag`). The passes updated since a tag are those whose version differs from the tag's.
Each component only grows, and the comparison does not depend on clocks or on the order in
which concurrent updates of different passes commit, which a single timestamp would (an update
that committed after a later-stamped one would never be listed).

That list grows by 16 bytes a pass, so only a short one (up to INLINE_MAX_LENGTH, about five
passes) is handed out as the tag itself. A longer one is kept by the service (the last few of
each device and pass type, `Registrations.keep_tag`) and the device gets `v2.<its digest>`, 25
bytes however many passes it holds. A `v2.` tag the service no longer keeps lists every pass,
as no tag does: never a pass missed, at worst a download that If-Modified-Since makes a 304.

A pass file's Last-Modified is a whole second, strictly later than the previous version's (the
issuer stores it with the file), so If-Modified-Since, compared with that stored value, tells
every version apart. The header sent is never later than the response's Date
(shared/http_date.py `dated`).
"""

import base64
import hashlib
from datetime import datetime
from typing import Final

from shared.http_date import modified_since

TAG_VERSION: Final = "v1."
STORED_TAG_VERSION: Final = "v2."
INLINE_MAX_LENGTH: Final = 96
MAX_TAG_LENGTH: Final = 64 * 1024  # a v1 tag a device sends beyond this is not ours: list all
MAX_VERSION_DIGITS: Final = 18  # a pass's version in a tag: a count of its updates


def _digest(serial_number: str) -> str:
    return hashlib.sha256(serial_number.encode()).hexdigest()[:12]


def encode_tag(versions: dict[str, int]) -> str:
    """The v1 tag of these serial numbers at these versions."""
    return TAG_VERSION + "~".join(
        sorted(f"{_digest(serial)}-{version}" for serial, version in versions.items())
    )


def stored_tag_id(tag: str) -> str:
    """The id a long v1 tag is kept under: 128 bits of its SHA-256, base64url (22 characters)."""
    return base64.urlsafe_b64encode(hashlib.sha256(tag.encode()).digest()[:16]).decode()[:22]


def decode_tag(tag: str | None, max_length: int = MAX_TAG_LENGTH) -> dict[str, int] | None:
    """digest -> version of a v1 tag, or None when there is no usable tag (then every pass is
    listed)."""
    if not tag or len(tag) > max_length or not tag.startswith(TAG_VERSION):
        return None
    versions: dict[str, int] = {}
    for part in filter(None, tag[len(TAG_VERSION) :].split("~")):
        digest, _, version = part.partition("-")
        # A version is a count of updates: 18 digits is far beyond any (and int() refuses
        # more than 4,300 digits with a ValueError, which was a 500).
        if not version.isascii() or not version.isdigit() or len(version) > MAX_VERSION_DIGITS:
            return None
        versions[digest] = int(version)
    return versions


def changed_since(versions: dict[str, int], known: dict[str, int] | None) -> list[str]:
    """The serial numbers (of `versions`: serial -> current version) whose version is not the
    one a decoded tag knows; all of them without a tag."""
    if known is None:
        return sorted(versions)
    return sorted(serial for serial, v in versions.items() if known.get(_digest(serial)) != v)


def updated_since(versions: dict[str, int], tag: str | None) -> list[str]:
    """`changed_since` a v1 tag as a device sends it."""
    return changed_since(versions, decode_tag(tag))


def not_modified(if_modified_since: str | None, last_modified: datetime) -> bool:
    """Whether the device's copy (If-Modified-Since) is the current version."""
    return not modified_since(if_modified_since, last_modified)
