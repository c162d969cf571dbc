"""Checks on parsed request bodies for values JSON allows but no service can carry or store."""

import math
from typing import Any

# JSON parsing lets through values that no service can carry or store: lone surrogates from
# `\ud800` escapes (not encodable as UTF-8), NUL in keys and integers beyond 64 bits (BSON
# refuses both), NaN and Infinity (not JSON; they would silently become null), and nesting deep
# enough to overflow serialization or MongoDB's 100-level limit. Bodies are checked for them
# before validation so they answer 400 naming the offending field instead of a 500.
MAX_BODY_DEPTH = 32
_INT64 = range(-(2**63), 2**63)


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def storable_problem(value: Any, path: tuple[str, ...]) -> tuple[str | None, str] | None:
    """The first value of a parsed body that cannot be stored: (dotted path, reason)."""
    param = ".".join(path) or None
    if isinstance(value, str):
        return None if _encodable(value) else (param, "text must be valid Unicode")
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return None if value in _INT64 else (param, "integers must fit in 64 bits")
    if isinstance(value, float):
        finite = math.isfinite(value)
        return None if finite else (param, "numbers must be finite (NaN and Infinity are not JSON)")
    if isinstance(value, dict | list):
        if len(path) >= MAX_BODY_DEPTH:
            return (path[0], f"the body may be nested at most {MAX_BODY_DEPTH} levels deep")
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            if isinstance(key, str) and (not _encodable(key) or "\x00" in key):
                return (param, "keys must be valid Unicode without NUL characters")
            if (problem := storable_problem(item, (*path, str(key)))) is not None:
                return problem
    return None
