"""Helpers for the tests of Variant A, `POST /passes` (spec 2.8, 4.2): sending it, and checking
an answer against the operation in the api's own OpenAPI document."""

from typing import Any

import httpx2
import jsonschema

from tests.support.stack import Stack


def openapi(stack: Stack) -> dict[str, Any]:
    """The api's OpenAPI document."""
    with stack.client() as client:
        document: dict[str, Any] = client.get("/openapi.json").json()
    return document


def schema_of(document: dict[str, Any], status: int | None = None) -> dict[str, Any]:
    """The request (status None) or response schema of the operation, $refs made local."""
    operation = document["paths"]["/passes"]["post"]
    part = operation["requestBody"] if status is None else operation["responses"][str(status)]
    schema = dict(part["content"]["application/json"]["schema"])
    schema["components"] = document["components"]
    return schema


def check(document: dict[str, Any], response: httpx2.Response) -> None:
    """The answer's body is what the document declares for its status."""
    jsonschema.validate(response.json(), schema_of(document, response.status_code))


def post_passes(stack: Stack, body: Any, key: str | None) -> httpx2.Response:
    """`POST /passes` with `body`, authenticated by `key` in x-api-key (none when None)."""
    headers = {} if key is None else {"x-api-key": key}
    with stack.client() as client:
        return client.post("/passes", json=body, headers=headers)
