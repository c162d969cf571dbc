"""Tests for `<lang>.lproj/pass.strings`: encoding, escaping and file names."""

import re

from services.issuer.localization import escape, localization_files, strings_file
from tests.issuer.pkpass_samples import LOCALIZATIONS

# A .strings line as Apple's parsers read it: "key" = "value"; with backslash escapes.
_LINE = re.compile(r'^"((?:[^"\\]|\\.)*)" = "((?:[^"\\]|\\.)*)";$')
_UNESCAPES = {"n": "\n", "r": "\r", "t": "\t", '"': '"', "\\": "\\"}


def _parse(data: bytes) -> dict[str, str]:
    assert data.startswith(b"\xff\xfe")
    text = data.decode("utf-16")  # honours the BOM
    assert text.endswith("\n")
    parsed: dict[str, str] = {}
    for line in text.splitlines():
        match = _LINE.match(line)
        assert match is not None, line
        key, value = (re.sub(r"\\(.)", lambda m: _UNESCAPES[m[1]], part) for part in match.groups())
        parsed[key] = value
    return parsed


def test_strings_file_is_utf16_with_bom_and_one_line_per_string() -> None:
    data = strings_file({"Seat": "Place", "Zoë": "東京"})

    assert data[:2] == b"\xff\xfe"
    assert data[2:].decode("utf-16-le") == '"Seat" = "Place";\n"Zoë" = "東京";\n'


def test_quotes_backslashes_and_line_breaks_are_escaped() -> None:
    strings = {'say "hi"': 'a "b"\\c\nd\re\tf', "plain": "x"}

    data = strings_file(strings)

    lines = data.decode("utf-16").splitlines()
    assert lines[0] == '"say \\"hi\\"" = "a \\"b\\"\\\\c\\nd\\re\\tf";'
    assert _parse(data) == strings
    assert escape("\\n") == "\\\\n"  # a literal backslash-n stays two characters


def test_every_sample_language_round_trips() -> None:
    files = localization_files(LOCALIZATIONS)

    assert list(files) == [
        "en.lproj/pass.strings",
        "fr.lproj/pass.strings",
        "pt-BR.lproj/pass.strings",
    ]
    for language, strings in LOCALIZATIONS.items():
        assert _parse(files[f"{language}.lproj/pass.strings"]) == strings


def test_languages_without_strings_get_no_folder() -> None:
    assert localization_files({"de": {}, "en": {"a": "b"}}) == {
        "en.lproj/pass.strings": strings_file({"a": "b"})
    }
