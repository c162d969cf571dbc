"""How much a pass may carry: field values, holder fields and metadata (docs/api-decisions.md).

Everything a pass holds crosses NATS several times (the command, the issuer's reply with the
Google save link that repeats the values, the lifecycle event with its snapshot), and NATS
carries at most 1 MiB per message. These limits keep the largest possible pass a small fraction
of that, and are still far beyond what Apple Wallet or Google Wallet show. The api checks each
request; the issuer checks the merged result of an update, since a PATCH adds to what is stored.
"""

import json
from typing import Any, Final

MAX_FIELD_VALUE_CHARS: Final = 2_000
MAX_FIELD_VALUES_CHARS: Final = 20_000  # all field values of a pass together
MAX_HOLDER_NAME_CHARS: Final = 200
MAX_METADATA_KEYS: Final = 50
MAX_METADATA_KEY_CHARS: Final = 40
MAX_METADATA_BYTES: Final = 8_192  # the metadata as compact JSON, UTF-8
MAX_METADATA_DEPTH: Final = 16

Problem = tuple[str, str]  # (param, message)


def field_values_problem(values: dict[str, str]) -> Problem | None:
    """The first field value over its limit, or the whole set over the total limit."""
    for key, value in values.items():
        if len(value) > MAX_FIELD_VALUE_CHARS:
            return (
                f"field_values.{key}",
                f"field_values.{key} has {len(value)} characters; at most "
                f"{MAX_FIELD_VALUE_CHARS} are allowed.",
            )
    total = sum(len(value) for value in values.values())
    if total > MAX_FIELD_VALUES_CHARS:
        return (
            "field_values",
            f"The field values of a pass have {total} characters together; at most "
            f"{MAX_FIELD_VALUES_CHARS} are allowed.",
        )
    return None


def metadata_problem(metadata: dict[str, Any]) -> Problem | None:
    """Too many keys, a key that is too long or cannot be stored safely, or too many bytes."""
    if len(metadata) > MAX_METADATA_KEYS:
        return (
            "metadata",
            f"metadata has {len(metadata)} keys; at most {MAX_METADATA_KEYS} are allowed.",
        )
    for key, value in metadata.items():
        if len(key) > MAX_METADATA_KEY_CHARS:
            return (
                f"metadata.{key[:MAX_METADATA_KEY_CHARS]}",
                f"metadata keys have at most {MAX_METADATA_KEY_CHARS} characters.",
            )
        if (problem := _key_problem(value, ("metadata", key))) is not None:
            return problem
    for path in _keys(metadata, ("metadata",)):
        if (problem := _unsafe_key(path)) is not None:
            return problem
    size = len(json.dumps(metadata, ensure_ascii=False, separators=(",", ":")).encode())
    if size > MAX_METADATA_BYTES:
        return (
            "metadata",
            f"metadata is {size} bytes as JSON; at most {MAX_METADATA_BYTES} are allowed.",
        )
    return None


def _key_problem(value: Any, path: tuple[str, ...]) -> Problem | None:
    if _depth(value) > MAX_METADATA_DEPTH:
        where = ".".join(path)
        return "metadata", f"{where} is nested more than {MAX_METADATA_DEPTH} levels deep."
    return None


def _keys(value: Any, path: tuple[str, ...]) -> list[tuple[str, ...]]:
    """The path of every object key in `value`, nested ones included."""
    found: list[tuple[str, ...]] = []
    if isinstance(value, dict):
        for key, item in value.items():
            found.append((*path, str(key)))
            found.extend(_keys(item, (*path, str(key))))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.extend(_keys(item, (*path, str(index))))
    return found


def _unsafe_key(path: tuple[str, ...]) -> Problem | None:
    # MongoDB gives `$` at the start of a key and `.` in a key operator and path meanings.
    key = path[-1]
    if key.startswith("$") or "." in key or not key:
        param = ".".join(path[:-1])
        return (
            param,
            f"{param} has the key {key!r}: keys may not be empty, start with $ or hold a dot.",
        )
    return None


def _depth(value: Any) -> int:
    if isinstance(value, dict | list):
        items = value.values() if isinstance(value, dict) else value
        return 1 + max((_depth(item) for item in items), default=0)
    return 0
