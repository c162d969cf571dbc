"""Variant A (spec 2.8, 4.2): how a `data` object maps onto a pass.

`data` is matched against the template's field keys; values become strings (numbers and
booleans as JSON text), and null means "use the template's default". Three more keys are
understood when no template field has that key: `holderName`, `holderEmail` (strings or null)
and `metadata` (an object). Any other key is refused with 400, so a typo never silently drops a
value.
"""

import json
from dataclasses import dataclass, field
from typing import Any

from pydantic import EmailStr, TypeAdapter, ValidationError

from shared.design import Design
from shared.errors import InvalidRequest

_EMAIL: TypeAdapter[str] = TypeAdapter(EmailStr)
RESERVED = ("holderName", "holderEmail", "metadata")


@dataclass
class PassInput:
    field_values: dict[str, str] = field(default_factory=dict)
    holder_name: str | None = None
    holder_email: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


def _as_text(key: str, value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool | int | float):
        return json.dumps(value)
    raise InvalidRequest(
        f"data.{key} must be a string, number, boolean or null.", param=f"data.{key}"
    )


def _optional_string(key: str, value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise InvalidRequest(f"data.{key} must be a string or null.", param=f"data.{key}")


def map_data(design: Design, data: dict[str, Any]) -> PassInput:
    known = design.field_keys()
    result = PassInput()
    for key, value in data.items():
        if key in known:
            if value is not None:
                result.field_values[key] = _as_text(key, value)
        elif key == "holderName":
            result.holder_name = _optional_string(key, value)
        elif key == "holderEmail":
            email = _optional_string(key, value)
            try:
                result.holder_email = None if email is None else _EMAIL.validate_python(email)
            except ValidationError as exc:
                raise InvalidRequest("data.holderEmail is not a valid email address.") from exc
        elif key == "metadata":
            if not isinstance(value, dict):
                raise InvalidRequest("data.metadata must be an object.", param="data.metadata")
            result.metadata = value
        else:
            expected = sorted(known) + list(RESERVED)
            raise InvalidRequest(
                f"Unknown data key '{key}'; this template accepts {expected}.", param=f"data.{key}"
            )
    return result
