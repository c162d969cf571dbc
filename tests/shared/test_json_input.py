"""loads_untrusted parses what Tessera can store and refuses the rest with one ValueError."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.json_input import UntrustedJsonError, loads_untrusted


def _refused(data: bytes, **kwargs: int) -> str:
    with pytest.raises(UntrustedJsonError) as caught:
        loads_untrusted(data, **kwargs)
    assert isinstance(caught.value, ValueError)
    return caught.value.reason


def test_ordinary_json_parses_as_json_loads_does() -> None:
    document = {"logs": ["a", "é", "\U0001f600"], "n": -(2**63), "m": 2**63 - 1, "x": 1.5}
    data = json.dumps(document).encode()
    assert loads_untrusted(data) == document
    assert loads_untrusted(b'"\\ud83d\\ude00 a pair is fine"') == "\U0001f600 a pair is fine"
    assert loads_untrusted(b'{"v": "nul \\u0000 in a value"}') == {"v": "nul \x00 in a value"}


def test_nesting_is_bounded_without_recursion() -> None:
    assert loads_untrusted(b"[" * 32 + b"]" * 32) is not None
    assert "32 levels" in _refused(b"[" * 33 + b"]" * 33)
    assert "3 levels" in _refused(b'{"a": {"b": [[1]]}}', max_depth=3)
    # Far past the interpreter's recursion limit: refused by the scan, not by RecursionError.
    assert "levels" in _refused(b"[" * 100_000)
    assert "levels" in _refused(b'{"a":' * 50_000)


def test_brackets_inside_strings_do_not_count() -> None:
    text = '["[[[[", "{{{{", "\\"[[[[", "\\\\", [["]]]]"]]]'
    assert loads_untrusted(text.encode(), max_depth=3) == [
        "[[[[",
        "{{{{",
        '"[[[[',
        "\\",
        [["]]]]"]],
    ]
    assert "levels" in _refused(b'["\\\\", [[[]]]]', max_depth=3)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"\xff\xfe{}", "UTF-8"),
        (b'"caf\xe9"', "UTF-8"),
        (b"\xed\xa0\x80", "UTF-8"),  # a surrogate encoded as UTF-8 is not UTF-8
        (json.dumps({"a": 1}).encode("utf-16"), "UTF-8"),
        (b"", "not valid JSON"),
        (b"{", "not valid JSON"),
        (b"[1,]", "not valid JSON"),
        (b"]]]", "not valid JSON"),
        (b"NaN", "NaN"),
        (b"[Infinity]", "Infinity"),
        (b'{"a": -Infinity}', "-Infinity"),
        (b"1e400", "finite"),
        (b"-1e400", "finite"),
        (b"9223372036854775808", "64 bits"),
        (b"-9223372036854775809", "64 bits"),
        (b"1" * 5000, "64 bits"),
        (b'"\\ud800"', "surrogate"),
        (b'["ok", {"deep": ["\\udfff"]}]', "surrogate"),
        (b'{"\\ud800": 1}', "keys"),
        (b'{"a\\u0000b": 1}', "keys"),
    ],
)
def test_what_cannot_be_stored_is_refused(data: bytes, reason: str) -> None:
    assert reason in _refused(data)


@given(st.recursive(st.none() | st.booleans() | st.text(), st.lists, max_leaves=30))
def test_json_dumps_output_of_plain_values_round_trips(value: object) -> None:
    data = json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return  # hypothesis drew a lone surrogate, which is refused above
    assert loads_untrusted(data, max_depth=1000) == value
