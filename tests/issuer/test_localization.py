"""Tests for `<lang>.lproj/pass.strings`: encoding, escaping, file names, the source language."""

import io
import re
import zipfile

import pytest

from services.issuer.localization import escape, localization_files, strings_file
from services.issuer.pkpass import build_pkpass
from shared.apple_identity import SigningIdentity, ensure_dev_identity
from shared.design import Design
from tests.issuer.pkpass_samples import LOCALIZATIONS, content, minimal_design

# A .strings line as Apple's parsers read it: "key" = "value"; with backslash escapes.
_LINE = re.compile(r'^"((?:[^"\\]|\\.)*)" = "((?:[^"\\]|\\.)*)";$')
_UNESCAPES = {"n": "\n", "r": "\r", "t": "\t", '"': '"', "\\": "\\"}


@pytest.fixture(scope="module")
def identity(tmp_path_factory: pytest.TempPathFactory) -> SigningIdentity:
    return ensure_dev_identity(tmp_path_factory.mktemp("signing"))


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
    files = localization_files(LOCALIZATIONS, "en")

    assert list(files) == [
        "en.lproj/pass.strings",
        "fr.lproj/pass.strings",
        "pt-BR.lproj/pass.strings",
    ]
    for language, strings in LOCALIZATIONS.items():
        assert _parse(files[f"{language}.lproj/pass.strings"]) == strings


def test_languages_without_strings_get_no_folder() -> None:
    assert localization_files({"de": {}, "en": {"a": "b"}}, "en") == {
        "en.lproj/pass.strings": strings_file({"a": "b"})
    }


def test_the_source_language_gets_a_folder_of_its_own() -> None:
    # Apple's documented fr + pt-BR example: without en.lproj an English iPhone picks one of
    # the two folders (Apple developer forums, thread 757013) and shows French.
    translated = {key: strings for key, strings in LOCALIZATIONS.items() if key != "en"}

    files = localization_files(translated, "en")

    assert list(files) == [
        "en.lproj/pass.strings",
        "fr.lproj/pass.strings",
        "pt-BR.lproj/pass.strings",
    ]
    # Every key either language translates reads as itself: the design's own text shows.
    assert _parse(files["en.lproj/pass.strings"]) == {
        "Seat": "Seat",
        "Terms": "Terms",
        "Concert ticket": "Concert ticket",
    }
    assert _parse(files["fr.lproj/pass.strings"]) == translated["fr"]


def test_the_source_language_is_the_designs_own() -> None:
    files = localization_files({"en": {"Seat": "Seat"}, "fr": {"Seat": "Place"}}, "de")

    assert list(files) == [
        "de.lproj/pass.strings",
        "en.lproj/pass.strings",
        "fr.lproj/pass.strings",
    ]
    assert _parse(files["de.lproj/pass.strings"]) == {"Seat": "Seat"}


def test_source_strings_the_design_gives_are_kept() -> None:
    own = {"en": {"Seat": "Seat number"}, "fr": {"Seat": "Place", "Gate": "Porte"}}

    files = localization_files(own, "en")

    assert _parse(files["en.lproj/pass.strings"]) == {"Seat": "Seat number"}
    # A source language listed without strings still gets the design's own text.
    empty = localization_files({"en": {}, "fr": {"Gate": "Porte"}}, "en")
    assert _parse(empty["en.lproj/pass.strings"]) == {"Gate": "Gate"}


def test_a_design_without_translations_gets_no_folder() -> None:
    assert localization_files({}, "en") == {}
    assert localization_files({"fr": {}}, "en") == {}


def test_the_source_language_folder_reaches_the_pkpass(identity: SigningIdentity) -> None:
    design = Design.model_validate(
        {
            **minimal_design("generic"),
            "localizations": {"fr": {"Seat": "Place"}, "pt-BR": {"Seat": "Assento"}},
        }
    )

    names = zipfile.ZipFile(io.BytesIO(build_pkpass(content(design), identity))).namelist()

    assert [name for name in names if name.endswith(".strings")] == [
        "en.lproj/pass.strings",
        "fr.lproj/pass.strings",
        "pt-BR.lproj/pass.strings",
    ]
    german = Design.model_validate({**design.model_dump(mode="json"), "source_language": "de"})
    names = zipfile.ZipFile(io.BytesIO(build_pkpass(content(german), identity))).namelist()
    assert "de.lproj/pass.strings" in names
    assert "en.lproj/pass.strings" not in names
