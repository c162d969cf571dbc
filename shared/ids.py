"""Prefixed, time-sortable identifiers: `new_id("pass")` -> `pass_0Mx3...`.

An id is a 48-bit millisecond timestamp followed by 80 random bits, written as 22 base62
characters in ASCII order, so ids sort by creation time (cursors and "newest first" rely on it).
Within one process ids are strictly increasing even inside one millisecond.
"""

import hashlib
import secrets
import threading
import time
from typing import Final

ALPHABET: Final = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_ID_CHARS: Final = 22
_RANDOM_BITS: Final = 80

PREFIXES: Final = {
    "account": "acct",
    "api_key": "key",
    "pass": "pass",
    "template": "tmpl",
    "pass_event": "psEvnt",
    "webhook": "whk",
    "webhook_delivery": "whd",
    "download_link": "pdl",
    "webhook_secret": "whsec",
    "request": "req",
    "command": "cmd",
    "device_log": "dlog",
    "job": "job",
    "scan": "scan",
    "scanner_key": "skey",
    "pass_bundle": "pbdl",
}

_lock = threading.Lock()
_last = 0


def _base62(value: int, width: int) -> str:
    chars = []
    for _ in range(width):
        value, rem = divmod(value, 62)
        chars.append(ALPHABET[rem])
    return "".join(reversed(chars))


def new_id(kind: str, *, unguessable: bool = False) -> str:
    """A new id for a kind named in PREFIXES (e.g. "pass" -> "pass_...").

    Ids made within one millisecond follow each other (the previous one plus one), so one id
    tells the next: `unguessable` keeps all 80 random bits instead (ids made within the same
    millisecond then sort in no particular order), for an id that is itself the secret that
    opens something, such as a pass bundle's public page (`{site_url}/b/{id}`)."""
    global _last
    if unguessable:
        value = (time.time_ns() // 1_000_000) << _RANDOM_BITS | secrets.randbits(_RANDOM_BITS)
        return f"{PREFIXES[kind]}_{_base62(value, _ID_CHARS)}"
    with _lock:
        candidate = (time.time_ns() // 1_000_000) << _RANDOM_BITS | secrets.randbits(_RANDOM_BITS)
        _last = candidate if candidate > _last else _last + 1
        value = _last
    return f"{PREFIXES[kind]}_{_base62(value, _ID_CHARS)}"


def derived_id(kind: str, at_ms: int, seed: str) -> str:
    """An id of `kind` that is the same every time it is made from the same inputs: `at_ms`
    (milliseconds since the epoch) in place of the creation time, 80 bits of SHA-256 of `seed`
    in place of the random part. For what may be made twice and must be recognised, like a
    webhook delivery made again from a redelivered event."""
    digest = int.from_bytes(hashlib.sha256(seed.encode()).digest()[:10], "big")
    return f"{PREFIXES[kind]}_{_base62(at_ms << _RANDOM_BITS | digest, _ID_CHARS)}"


def id_value(value: str) -> int:
    """The number an id's body writes (its time in the high bits, then the random part)."""
    number = 0
    for char in value.rpartition("_")[2]:
        number = number * 62 + ALPHABET.index(char)
    return number


def first_id_at(kind: str, at_ms: int) -> str:
    """The lowest id of `kind` made at `at_ms` (milliseconds since the epoch): ids below it
    were made earlier (a time bound as an `_id` range, on the primary index)."""
    return f"{PREFIXES[kind]}_{_base62(at_ms << _RANDOM_BITS, _ID_CHARS)}"


def id_time_ms(value: str) -> int:
    """When an id was made (milliseconds since the epoch), from its time-sortable body."""
    return id_value(value) >> _RANDOM_BITS


def has_prefix(value: str, kind: str) -> bool:
    """Whether `value` looks like an id of `kind`: right prefix, right length, base62 body."""
    prefix = PREFIXES[kind] + "_"
    body = value[len(prefix) :]
    return (
        value.startswith(prefix)
        and len(body) == _ID_CHARS
        and all(char in ALPHABET for char in body)
    )


def random_token(kind: str, nbytes: int = 24) -> str:
    """A secret token with a type prefix and `nbytes` of randomness (default 192 bits)."""
    return f"{PREFIXES[kind]}_{secrets.token_urlsafe(nbytes)}"


def short_slug(length: int = 16) -> str:
    """A URL-safe, unguessable slug: `length` base62 characters (16 -> ~95 bits)."""
    return "".join(secrets.choice(ALPHABET) for _ in range(length))
