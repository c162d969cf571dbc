"""Variant A's errors in its own names (services/api/variant_a.py; over HTTP:
tests/e2e/test_variant_a.py)."""

from typing import Any

import pytest

from services.api.variant_a import PassInput, checked_as_v1
from shared.errors import InvalidRequest


def _param(**mapped: Any) -> str | None:
    with pytest.raises(InvalidRequest) as refused:
        checked_as_v1("tmpl_0000000000000000000000", PassInput(**mapped))
    return refused.value.param


@pytest.mark.parametrize(
    ("mapped", "param"),
    [
        ({"metadata": {"$x": "1"}}, "data.metadata"),
        # The sender's own keys that read like v1 names are not renamed.
        ({"metadata": {"field_values": {"$x": 1}}}, "data.metadata.field_values"),
        ({"metadata": {"holder_name": {"a.b": 1}}}, "data.metadata.holder_name"),
        ({"holder_email": "not an address"}, "data.holderEmail"),
    ],
)
def test_only_the_first_segment_of_a_param_is_renamed(mapped: dict[str, Any], param: str) -> None:
    assert _param(**mapped) == param
