"""The issuer's checks of what a command asks for, each failing with the offending `param`."""

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from services.issuer.content import MetadataDateError, metadata_dates
from shared.dates import date_text_problem
from shared.design import Design, DesignStyleError
from shared.errors import InvalidRequest
from shared.pass_limits import field_values_problem, metadata_problem
from shared.validation_messages import client_message


def validate_design(
    design: dict[str, Any], apple_style: str, template_type: str | None = None
) -> Design:
    """The design as a model, checked for the template's apple_style and type."""
    try:
        model = Design.model_validate(design)
    except ValidationError as exc:
        first = exc.errors()[0]
        path = ".".join(str(part) for part in ("design", *first["loc"]))
        message = client_message(str(first["msg"]))
        raise InvalidRequest(
            f"Invalid {path}: {message}.", param=path, code="parameter_invalid"
        ) from exc
    try:
        model.check_style(apple_style, template_type)
    except DesignStyleError as exc:
        raise InvalidRequest(
            str(exc), param=f"design.{exc.param}", code="parameter_invalid"
        ) from exc
    return model


def check_field_values(design: Design, values: Mapping[str, str | None]) -> None:
    """Every key a field of the design; a date field's date one pass.json can hold."""
    known = design.field_keys()
    for key in values:
        if key not in known:
            raise InvalidRequest(
                f"Unknown field '{key}': the template defines {sorted(known) or 'no fields'}.",
                param=f"field_values.{key}",
                code="parameter_unknown",
            )
    for field in design.fields:
        value = values.get(field.key)
        if value is None or (field.date_style is None and field.time_style is None):
            continue
        problem = date_text_problem(value)
        if problem is not None:
            raise InvalidRequest(
                f"field_values.{field.key} {problem}: {value!r}.",
                param=f"field_values.{field.key}",
                code="parameter_invalid",
            )


def check_metadata_dates(metadata: dict[str, Any]) -> None:
    """`metadata.expiration_date` / `relevant_date` override the design's dates: check them."""
    try:
        metadata_dates(metadata)
    except MetadataDateError as exc:
        raise InvalidRequest(str(exc), param=exc.param, code="parameter_invalid") from exc


def check_pass_limits(field_values: dict[str, str], metadata: dict[str, Any]) -> None:
    """What a pass will hold, after an update's merge, within shared/pass_limits.py."""
    problem = field_values_problem(field_values) or metadata_problem(metadata)
    if problem is not None:
        param, message = problem
        raise InvalidRequest(message, param=param, code="parameter_too_large")
