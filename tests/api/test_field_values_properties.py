"""Property tests of request-body handling: Variant A's `data` mapping (variant_a.map_data) and
the storable-body checks (bodies.storable_problem, run by every body model) take arbitrary JSON
and either accept it or refuse it with InvalidRequest (or pydantic's ValidationError, which the
api renders as 400); nothing else is ever raised."""

import contextlib
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from services.api.bodies import storable_problem
from services.api.schemas import (
    PassCreate,
    PassUpdate,
    TemplateCreate,
    WebhookCreate,
    WebhookUpdate,
)
from services.api.variant_a import RESERVED, map_data
from shared.design import Design
from shared.errors import InvalidRequest

SETTINGS = settings(max_examples=200, deadline=None)
DESIGN = Design.model_validate(
    {
        "organization_name": "Acme",
        "description": "Ticket",
        "fields": [
            {"key": "seat", "label": "Seat", "slot": "primary"},
            {"key": "gate", "label": "Gate", "slot": "secondary"},
        ],
    }
)
# What json.loads can produce, including what JSON allows but no store can carry: lone
# surrogates, NUL in keys, integers beyond 64 bits, NaN and Infinity (Python's parser accepts
# them).
TEXT = st.text() | st.sampled_from(["\ud800", "a\x00b", "x\udfff", ""])
SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | TEXT
JSON_VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=20,
)
DATA_KEYS = st.sampled_from(["seat", "gate", *RESERVED]) | TEXT
DATA = st.dictionaries(DATA_KEYS, JSON_VALUES, max_size=6)


@SETTINGS
@given(data=DATA)
def test_map_data_accepts_or_raises_invalid_request(data: dict[str, Any]) -> None:
    try:
        result = map_data(DESIGN, data)
    except InvalidRequest:
        return
    assert set(result.field_values) <= DESIGN.field_keys()
    assert all(isinstance(value, str) for value in result.field_values.values())
    assert result.holder_name is None or isinstance(result.holder_name, str)
    assert isinstance(result.metadata, dict)


@SETTINGS
@given(value=JSON_VALUES)
def test_storable_problem_never_raises(value: Any) -> None:
    problem = storable_problem(value, ())
    if problem is not None:
        param, reason = problem
        assert param is None or isinstance(param, str)
        assert reason


@SETTINGS
@given(value=JSON_VALUES | st.dictionaries(TEXT, JSON_VALUES, max_size=6))
def test_body_models_raise_only_request_errors(value: Any) -> None:
    for model in (PassCreate, PassUpdate, TemplateCreate, WebhookCreate, WebhookUpdate):
        with contextlib.suppress(InvalidRequest, ValidationError):
            model.model_validate(value)


def _nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"k": value}
    return value


@settings(max_examples=50, deadline=None)
@given(depth=st.integers(min_value=0, max_value=200))
def test_deep_nesting_is_refused_not_crashed(depth: int) -> None:
    body = {"template_id": "tmpl_x", "metadata": _nested(depth)}
    with contextlib.suppress(InvalidRequest, ValidationError):
        PassCreate.model_validate(body)


def test_webhook_events_of_any_json_type_are_a_request_error() -> None:
    """Found by schemathesis: a list in `events` made the membership test raise TypeError."""
    for model in (WebhookCreate, WebhookUpdate):
        with contextlib.suppress(InvalidRequest, ValidationError):
            model.model_validate({"url": "https://x.example", "events": [False, None, [190], {}]})
