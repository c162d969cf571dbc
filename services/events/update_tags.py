"""The update tags of Apple's web service: `lastUpdated` / `passesUpdatedSince`, Last-Modified.

`lastUpdated` is opaque to the device, which hands it back as `passesUpdatedSince`. Tessera's
tag lists the version of every pass the device had registered (of that pass type) when it got
the tag, each serial number shortened to a 48-bit digest: `v1.<digest>-<version>~...`. The
passes updated since a tag are those whose version differs from the tag's. Each component only
grows, and the comparison does not depend on clocks or on the order in which concurrent updates
of different passes commit, which a single timestamp would (an update that committed after a
later-stamped one would never be listed).

A pass file's Last-Modified is a whole second, strictly later than the previous version's (the
issuer stores it with the file), so If-Modified-Since tells every version apart.
"""

import hashlib
from datetime import UTC, datetime
from email.utils import format_datetime, parsedate_to_datetime

TAG_VERSION = "v1."
MAX_TAG_LENGTH = 64 * 1024  # beyond this a tag is not one of ours: list everything


def _digest(serial_number: str) -> str:
    return hashlib.sha256(serial_number.encode()).hexdigest()[:12]


def encode_tag(versions: dict[str, int]) -> str:
    """The tag of these serial numbers at these versions."""
    return TAG_VERSION + "~".join(
        sorted(f"{_digest(serial)}-{version}" for serial, version in versions.items())
    )


def decode_tag(tag: str | None) -> dict[str, int] | None:
    """digest -> version, or None when there is no usable tag (then every pass is listed)."""
    if not tag or len(tag) > MAX_TAG_LENGTH or not tag.startswith(TAG_VERSION):
        return None
    versions: dict[str, int] = {}
    for part in filter(None, tag[len(TAG_VERSION) :].split("~")):
        digest, _, version = part.partition("-")
        if not version.isdigit():
            return None
        versions[digest] = int(version)
    return versions


def updated_since(versions: dict[str, int], tag: str | None) -> list[str]:
    """The serial numbers (of `versions`: serial -> current version) changed since `tag`."""
    known = decode_tag(tag)
    if known is None:
        return sorted(versions)
    return sorted(serial for serial, v in versions.items() if known.get(_digest(serial)) != v)


def http_date(moment: datetime) -> str:
    return format_datetime(moment.astimezone(UTC), usegmt=True)


def not_modified(if_modified_since: str | None, last_modified: datetime) -> bool:
    """Whether the device's copy (If-Modified-Since) is the current version."""
    if not if_modified_since:
        return False
    try:
        since = parsedate_to_datetime(if_modified_since)
    except (TypeError, ValueError):
        return False
    if since.tzinfo is None:  # an HTTP date without "GMT": read it as UTC
        since = since.replace(tzinfo=UTC)
    return since >= last_modified
