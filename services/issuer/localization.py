"""`<lang>.lproj/pass.strings` files from the design's `localizations`.

Wallet looks up every localizable pass.json string (field labels and values, description,
logo text, barcode alt text, ...) as a key in the strings file of the device's language and
shows the translation when there is one. Apple's tools write strings files in UTF-16; so do
we, with a byte order mark, one `"key" = "value";` line per string.
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
