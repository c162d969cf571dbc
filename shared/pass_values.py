"""A pass's own values, checked the same way wherever they arrive: the issuer's commands (a
POST or PATCH of a pass, a batch, an import's chunk, an update job) and the api's check of an
import's rows before any job exists, so that a row the worker would refuse fails at upload with
its row number and takes no quota unit (docs/api-decisions.md#jobs).

The dates a pass's metadata may carry (`expiration_date`, `relevant_date`) override the design's
(docs/templates.md).
"""

import datetime
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from shared.barcode_capacity import barcode_problem
from shared.dates import date_text_problem, parse_aware_datetime, parse_w3c_datetime
from shared.design import Design
from shared.errors import InvalidRequest
from shared.models import PassRecord, TemplateRecord
from shared.pass_limits import field_values_problem, metadata_problem

METADATA_DATE_KEYS = ("expiration_date", "relevant_date")


def merged(current: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    """`current` with `changes` applied as a PATCH applies them (a PATCH of one pass, an
    update_passes job): a value replaces, a null removes the key (a field then shows its
    template default again; a metadata key is gone, as in Stripe's metadata)."""
    result = dict(current)
    for key, value in changes.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = value
    return result


class MetadataDateError(ValueError):
    """An invalid per-pass date in metadata; `param` is e.g. "metadata.relevant_date"."""

    def __init__(self, param: str, message: str):
        super().__init__(f"{param} {message}")
        self.param = param


@dataclass(frozen=True)
class MetadataDates:
    expiration_date: datetime.datetime | None = None
    relevant_date: datetime.datetime | None = None


def metadata_dates(metadata: Mapping[str, object], *, strict: bool = True) -> MetadataDates:
    """The per-pass date overrides found in a pass's metadata.

    With `strict` (a value the client sends), a present but invalid value raises
    MetadataDateError (`param` is `metadata.<key>`), an offset with seconds included; without
    it (a stored pass being rendered), invalid values are ignored (the design's date applies)
    and an offset with seconds, stored before it was refused, is kept for pass.json to round.
    """
    parse = parse_w3c_datetime if strict else parse_aware_datetime
    found: dict[str, datetime.datetime] = {}
    for key in METADATA_DATE_KEYS:
        raw = metadata.get(key)
        if raw is None:
            continue
        try:
            found[key] = parse(raw)
        except ValueError as exc:
            if strict:
                raise MetadataDateError(f"metadata.{key}", str(exc)) from exc
    return MetadataDates(**found)


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


def check_barcode_fits(
    design: Design, field_values: dict[str, str], changed: Collection[str] | None = None
) -> None:
    """The pass's barcode, with its values, one its format can carry (shared/barcode_capacity.py);
    the 400 names the first value the message takes, or the barcode when it takes none. With
    `changed` (an update), only when a changed key is one a barcode shows: a pass stored before
    this check stays updatable; pass None for an update that also moves the pass to a newer
    design (`moves_design`), whose barcodes may not carry the values it already holds."""
    if changed is not None:
        shown = {key for code in design.barcode_list() for key in code.field_keys()}
        if not shown.intersection(changed):
            return
    problem = barcode_problem(design, field_values)
    if problem is None:
        return
    keys = [key for key in problem.barcode.field_keys() if key in field_values]
    param = f"field_values.{keys[0]}" if keys else f"design.{problem.where}.message"
    raise InvalidRequest(
        f"The pass's barcode cannot carry its values: {problem.message}.",
        param=param,
        code="parameter_invalid",
    )


def moves_design(record: PassRecord, template: TemplateRecord) -> bool:
    """Whether rebuilding `record` builds it from a newer design than its current file's (a
    rollout that has not reached it, or whose row failed for its barcode)."""
    return record.design_version < template.design_version


def check_pass_values(
    design: Design, field_values: dict[str, str], metadata: dict[str, Any]
) -> None:
    """Everything the issuer checks of a new pass's values; raises the first one's 400."""
    check_field_values(design, field_values)
    check_pass_limits(field_values, metadata)
    check_metadata_dates(metadata)
    check_barcode_fits(design, field_values)
