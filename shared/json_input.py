"""Parsing JSON from untrusted bytes, refusing what no service can carry or store.

`json.loads` accepts more than Tessera can handle: nesting deep enough to raise RecursionError
(a 500 with a traceback), NaN and Infinity (not JSON), `1e400` (parsed as infinity), integers
beyond 64 bits and lone surrogates from `\\ud800` escapes (BSON refuses both; a surrogate cannot
even be encoded as UTF-8), NUL in keys (BSON refuses it), and bytes in UTF-16 or UTF-32 (which
it detects). `loads_untrusted` refuses each of these with one exception, `UntrustedJsonError`,
whose `reason` is short and safe to log or answer, so a caller maps every bad body to one 4xx.

The depth is checked before parsing, by a linear scan that counts brackets outside strings, so
a body of ten thousand `[` never reaches the recursive parser.
"""

import json
import math
import re
from typing import Any, Final, NoReturn

DEFAULT_MAX_DEPTH: Final = 32
_INT64: Final = range(-(2**63), 2**63)
# Every character the depth scan must look at: string delimiters, escapes, brackets.
_STRUCTURE: Final = re.compile(r'["\\\[\]{}]')
_SURROGATE: Final = re.compile("[\ud800-\udfff]")


class UntrustedJsonError(ValueError):
    """The bytes are not JSON Tessera accepts; `reason` says why in a few words."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def loads_untrusted(data: bytes, *, max_depth: int = DEFAULT_MAX_DEPTH) -> Any:
    """The parsed value of UTF-8 JSON `data`, or UntrustedJsonError for anything refused:
    invalid UTF-8 or JSON, arrays and objects nested deeper than `max_depth`, NaN, Infinity and
    numbers that overflow to them, integers beyond 64 bits, strings or keys with lone
    surrogates, and keys with NUL."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise UntrustedJsonError("not valid UTF-8") from None
    if _nested_deeper_than(text, max_depth):
        raise UntrustedJsonError(f"nested more than {max_depth} levels deep")
    try:
        value = json.loads(
            text, parse_constant=_refuse_constant, parse_int=_int64, parse_float=_finite
        )
    except UntrustedJsonError:
        raise
    except RecursionError:  # only when max_depth is set above the interpreter's own limit
        raise UntrustedJsonError(f"nested more than {max_depth} levels deep") from None
    except ValueError:  # JSONDecodeError, and int() past its digit limit
        raise UntrustedJsonError("not valid JSON") from None
    _check_strings(value)
    return value


def _nested_deeper_than(text: str, max_depth: int) -> bool:
    depth = 0
    in_string = False
    escaped_at = -1  # the position of the character a backslash escapes
    for match in _STRUCTURE.finditer(text):
        position, char = match.start(), match.group()
        if position == escaped_at:
            continue
        if in_string:
            if char == "\\":
                escaped_at = position + 1
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > max_depth:
                return True
        elif char in "]}":
            depth -= 1  # unbalanced brackets are json.loads's to refuse
    return False


def _refuse_constant(name: str) -> NoReturn:
    raise UntrustedJsonError(f"{name} is not a JSON number")


def _int64(digits: str) -> int:
    # The length check first: int() of a huge digit string is slow, then refused anyway.
    if len(digits) > 20 or (value := int(digits)) not in _INT64:
        raise UntrustedJsonError("integers must fit in 64 bits")
    return value


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise UntrustedJsonError("numbers must be finite")
    return value


def _check_strings(value: Any) -> None:
    """Refuse lone surrogates in strings and keys, and NUL in keys (iteratively: the depth is
    bounded already, but nothing here should depend on that)."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                raise UntrustedJsonError("text must be valid Unicode (a lone surrogate)")
        elif isinstance(item, list):
            pending.extend(item)
        elif isinstance(item, dict):
            for key, child in item.items():
                if _SURROGATE.search(key) or "\x00" in key:
                    raise UntrustedJsonError("keys must be valid Unicode without NUL")
                pending.append(child)
