"""Characters a webhook URL may not contain, checked alike by the api and the webhooks service.

Control characters (C0, DEL, C1) and whitespace are refused outright rather than stripped or
percent-encoded: `urllib.parse.urlsplit` silently drops tab, CR and LF, so a URL holding them
would be checked as one string and sent as another, and CR or LF could split the request line.
"""

import unicodedata


def url_characters_problem(url: str, *, invisible: bool = True) -> str | None:
    """Why `url` may not be used as it is, or None when its characters are acceptable. With
    `invisible` (a URL being saved), format characters too (a right-to-left override that
    disguises it, a zero-width space): refused since 2026-11-28, so a URL saved before with
    one is still sent (httpx percent-encodes it), checked with `invisible=False`."""
    refused = ("Cc", "Cf") if invisible else ("Cc",)
    for position, char in enumerate(url):
        if unicodedata.category(char) in refused or char.isspace():
            return (
                "must not contain control, invisible or whitespace characters "
                f"(U+{ord(char):04X} at position {position})"
            )
    return None
