"""`<lang>.lproj/pass.strings` files from the design's `localizations` (docs/templates.md).

Written in UTF-16 with a byte order mark, as Apple's own tools write them.

The source language (`design.source_language`) gets a folder of its own: an iPhone whose
languages match none of the pass's folders picks one of them (Apple developer forums, thread
757013: an English iPhone shows the French of a `fr` + `pt-BR` pass), so the language the
design is written in must be one of them for that iPhone to fall back to it.
"""

from collections.abc import Mapping

_BOM = "\ufeff"
_ESCAPES = str.maketrans({"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"})


def strings_file(strings: Mapping[str, str]) -> bytes:
    """A pass.strings file: UTF-16 little-endian with a BOM, one line per string."""
    lines = [f'"{escape(key)}" = "{escape(value)}";\n' for key, value in strings.items()]
    return (_BOM + "".join(lines)).encode("utf-16-le")


def escape(text: str) -> str:
    """Escape backslashes, quotes and line breaks for a quoted .strings literal."""
    return text.translate(_ESCAPES)


def source_strings(localizations: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    """Every key the languages translate, mapped to itself: in the source language a key is
    its own text. In the order of the languages (sorted), then of their keys."""
    return {key: key for language in sorted(localizations) for key in localizations[language]}


def localization_files(
    localizations: Mapping[str, Mapping[str, str]], source_language: str
) -> dict[str, bytes]:
    """`<lang>.lproj/pass.strings` for every language with at least one string, sorted, and
    one for `source_language` when there is any other and it has no strings of its own."""
    languages = {language: dict(localizations[language]) for language in localizations}
    if any(languages.values()) and not languages.get(source_language):
        languages[source_language] = source_strings(localizations)
    return {
        f"{language}.lproj/pass.strings": strings_file(languages[language])
        for language in sorted(languages)
        if languages[language]
    }
