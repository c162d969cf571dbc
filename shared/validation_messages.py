"""Pydantic's error messages, reworded for API clients.

Pydantic writes for Python programmers: a validator's ValueError comes back as "Value error, ...",
a non-object body as "Input should be a valid dictionary or object to extract fields from", and
most messages carry no full stop while ours do (or end with one, giving ".." once we add ours).
Every 400 built from a pydantic error (the api's request validation, the issuer's design check)
goes through `client_message`, so the wording is the same wherever the error is raised.
"""

_PREFIXES = ("Value error, ", "Assertion failed, ")
_SUBJECTS = (
    "Input should ",
    "String should ",
    "List should ",
    "Value should ",
    "Dictionary should ",
)
_REWORDED = {
    "Input should be a valid dictionary or object to extract fields from": (
        "must be a JSON object"
    ),
    "Input should be a valid dictionary": "must be a JSON object",
    "Input should be a valid list": "must be a JSON array",
    "Input should be a valid string": "must be a string",
    "Input should be a valid boolean": "must be true or false",
    "Input should be a valid integer": "must be an integer",
    "Input should be a valid boolean, unable to interpret input": "must be true or false",
    "Input should be a valid integer, unable to parse string as an integer": ("must be an integer"),
}


def client_message(msg: str) -> str:
    """`msg` without library prefixes, reworded where pydantic's wording is its own, and
    without a trailing full stop (callers end the sentence)."""
    text = msg.strip()
    for prefix in _PREFIXES:
        if text.startswith(prefix):
            text = text[len(prefix) :]
    text = _REWORDED.get(text, text)
    # "Input should be greater than or equal to 1" -> "must be greater than or equal to 1".
    for subject in _SUBJECTS:
        if text.startswith(subject):
            text = "must " + text[len(subject) :]
            break
    return text.rstrip(". ")


def dotted_path(loc: "tuple[object, ...] | list[object]") -> str:
    """Pydantic's error location as the API's `param`: the field names joined by dots. A bad
    key of an object (its location ends in the key, then "[key]") names the object, and the
    names pydantic adds for unions and wrapped types are left out."""
    parts = [str(part) for part in loc]
    if parts and parts[-1] == "[key]":
        parts = parts[:-2]  # the key itself (perhaps empty) and pydantic's marker
    return ".".join(part for part in parts if not part.startswith("function-"))
