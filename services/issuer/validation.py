"""The issuer's checks of what a command asks for, each failing with the offending `param`."""

from typing import Any

from pydantic import ValidationError

from shared.barcode_capacity import barcode_problem
from shared.design import Design, DesignStyleError
from shared.errors import InvalidRequest
from shared.validation_messages import client_message, dotted_path


def validate_design(
    design: dict[str, Any], apple_style: str, template_type: str | None = None
) -> Design:
    """The design as a model, checked for the template's apple_style and type."""
    try:
        model = Design.model_validate(design)
    except ValidationError as exc:
        first = exc.errors()[0]
        path = dotted_path(("design", *first["loc"]))
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
    # Its fixed text (placeholders at their longest identifiers, field values empty).
    if (problem := barcode_problem(model, {})) is not None:
        raise InvalidRequest(
            f"design.{problem.where}.message: {problem.message}.",
            param=f"design.{problem.where}.message",
            code="parameter_invalid",
        )
    return model
