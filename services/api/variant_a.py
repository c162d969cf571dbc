"""Variant A (spec 2.8, 4.2): how a `data` object maps onto a pass.

`data` is matched against the template's field keys; values become strings (numbers and
booleans as JSON text), and null means "use the template's default". Three more keys are
understood when no template field has that key: `holderName`, `holderEmail` (strings or null)
and `metadata` (an object). Any other key is refused with 400, so a typo never silently drops a
value. The mapped pass then goes through the v1 body rules and limits (`checked_as_v1`), so
both interfaces accept exactly the same passes; errors name Variant A's keys.
"""

import json
import re
from dataclasses import dataclass, field
from typing import Any

from pydantic import EmailStr, TypeAdapter, ValidationError

from services.api.schemas import PassCreate
from shared.dates import date_text_problem
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


def _date_checked(key: str, text: str, dated: set[str]) -> str:
    """A date field's date must be one pass.json can hold: the issuer's rule, named here by
    Variant A's key (`data.<key>`) rather than the v1 one."""
    if key in dated and (problem := date_text_problem(text)) is not None:
        raise InvalidRequest(f"data.{key} {problem}: {text!r}.", param=f"data.{key}")
    return text


def map_data(design: Design, data: dict[str, Any]) -> PassInput:
    known = design.field_keys()
    dated = {f.key for f in design.fields if f.date_style is not None or f.time_style is not None}
    result = PassInput()
    for key, value in data.items():
        if key in known:
            if value is not None:
                result.field_values[key] = _date_checked(key, _as_text(key, value), dated)
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


# v1 names -> Variant A names, for the params and messages of errors.
_V1_NAMES = (
    (re.compile(r"\bfield_values\.([^\s:]+)"), r"data.\1"),
    (re.compile(r"\bfield_values\b"), "data"),
    (re.compile(r"\bmetadata\b"), "data.metadata"),
    (re.compile(r"\bholder_name\b"), "data.holderName"),
    (re.compile(r"\bholder_email\b"), "data.holderEmail"),
    (re.compile(r"\btemplate_id\b"), "templateId"),
)


_V1_HEADS = {
    "field_values": "data",
    "metadata": "data.metadata",
    "holder_name": "data.holderName",
    "holder_email": "data.holderEmail",
    "template_id": "templateId",
}


def _variant_a_names(text: str) -> str:
    for pattern, replacement in _V1_NAMES:
        text = pattern.sub(replacement, text)
    return text


def _variant_a_param(param: str) -> str:
    """A v1 param as Variant A names it: its first segment only, the rest being the sender's
    own keys (`metadata.field_values.$x` is `data.metadata.field_values.$x`)."""
    head, dot, rest = param.partition(".")
    return f"{_V1_HEADS.get(head, head)}{dot}{rest}"


def _variant_a_error(message: str, param: str | None) -> tuple[str, str | None]:
    """An error's message and param in Variant A's names: where the message repeats the param,
    that is renamed as the param is; other messages by name (they hold no sender's key)."""
    if param is None:
        return _variant_a_names(message), None
    renamed = _variant_a_param(param)
    if param in message:
        return message.replace(param, renamed), renamed
    return _variant_a_names(message), renamed


def checked_as_v1(template_id: str, mapped: PassInput) -> PassCreate:
    """The mapped pass validated by `POST /v1/passes`'s own model: the same limits and rules."""
    try:
        return PassCreate.model_validate(
            {
                "template_id": template_id,
                "holder_email": mapped.holder_email,
                "holder_name": mapped.holder_name,
                "field_values": mapped.field_values,
                "metadata": mapped.metadata,
            }
        )
    except InvalidRequest as exc:
        message, param = _variant_a_error(exc.message, exc.param)
        raise InvalidRequest(message, param=param, code=exc.code) from None
    except ValidationError as exc:
        first = exc.errors()[0]
        param = _variant_a_param(".".join(str(part) for part in first["loc"]))
        raise InvalidRequest(f"Invalid {param}: {first['msg']}.", param=param) from None
