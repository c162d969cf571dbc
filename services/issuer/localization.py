"""`<lang>.lproj/pass.strings` files from the design's `localizations` (docs/templates.md).

Written in UTF-16 with a byte order mark, as Apple's own tools write them.
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


def localization_files(localizations: Mapping[str, Mapping[str, str]]) -> dict[str, bytes]:
    """`<lang>.lproj/pass.strings` for every language with at least one string, sorted."""
    return {
        f"{language}.lproj/pass.strings": strings_file(localizations[language])
        for language in sorted(localizations)
        if localizations[language]
    }
