"""The OpenAPI documents, minus FastAPI's automatic 422: Tessera answers 400 for bad input.

`/openapi.json` is the public document: the v1 API, Variant A and the public pages. The
operator API (`/admin/v1`) is left out of it; operators read its own document at
`GET /admin/v1/openapi.json`, behind the admin token. Both get their summaries, descriptions,
tags and examples from services/api/openapi_docs.py (docs/api-docs.md).
"""

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from services.api.openapi_docs import (
    OPERATIONS,
    OPERATOR_OPERATIONS,
    OPERATOR_TAGS,
    PROPERTIES,
    TAG_NAMES,
    TAGS,
    Doc,
    Examples,
)

OPERATOR_PREFIX = "/admin/"


def operator_document(app: FastAPI) -> dict[str, Any]:
    """The operator API's own document."""
    return _document(app, operator=True)


def install(app: FastAPI) -> None:
    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = _document(app, operator=False)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]  # FastAPI's documented override hook


def _document(app: FastAPI, *, operator: bool) -> dict[str, Any]:
    title = f"{app.title} operator API" if operator else app.title
    document = get_openapi(
        title=title, version=app.version, description=app.description, routes=app.routes
    )
    document["paths"] = {
        path: operations
        for path, operations in document.get("paths", {}).items()
        if path.startswith(OPERATOR_PREFIX) == operator
    }
    secured = OPERATOR_PREFIX if operator else "/v1/"
    for path, operations in document["paths"].items():
        for operation in operations.values():
            operation.get("responses", {}).pop("422", None)
            if path.startswith(secured):
                operation["security"] = [{"BearerAuth": []}]
    components = document.setdefault("components", {})
    components["securitySchemes"] = {
        "BearerAuth": {
            "type": "http",
            "scheme": "bearer",
            "description": "the admin token" if operator else "svc_test_/svc_live_ key",
        },
    }
    if not operator:
        components["securitySchemes"]["ApiKeyAuth"] = {
            "type": "apiKey",
            "in": "header",
            "name": "x-api-key",
        }
    components["schemas"] = _used_schemas(document["paths"], components.get("schemas", {}))
    if operator:
        _describe(document, OPERATOR_OPERATIONS, OPERATOR_TAGS)
    else:
        _describe(document, OPERATIONS, TAGS)
    _describe_properties(components["schemas"])
    return document


def _describe(
    document: dict[str, Any], docs: dict[tuple[str, str], Doc], tags: list[dict[str, str]]
) -> None:
    """Each operation's entry of `docs` applied; the tags the document uses, described."""
    used: set[str] = set()
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            doc = docs.get((method, path))
            if doc is None:
                # A route without an entry still gets the reference's tag names.
                operation["tags"] = [TAG_NAMES.get(tag, tag) for tag in operation.get("tags", [])]
            else:
                _apply(operation, doc)
            used.update(operation.get("tags", []))
    document["tags"] = [tag for tag in tags if tag["name"] in used]


def _apply(operation: dict[str, Any], doc: Doc) -> None:
    operation["summary"] = doc.summary
    operation["description"] = doc.description
    operation["tags"] = [doc.tag]
    responses: dict[str, Any] = operation.setdefault("responses", {})
    if doc.responses is not None:
        # The real answers of pages, files and redirects replace FastAPI's "200 JSON".
        kept = {status: answer for status, answer in responses.items() if status[0] not in "23"}
        responses = dict(sorted({**kept, **doc.responses}.items()))
        operation["responses"] = responses
    if doc.request:
        body = operation.get("requestBody", {}).get("content", {}).get("application/json")
        if body is not None:
            body["examples"] = _examples(doc.request)
    success = next((status for status in responses if status.startswith("2")), None)
    if doc.response and success is not None:
        content = responses[success].setdefault("content", {})
        content.setdefault("application/json", {})["examples"] = _examples(doc.response)


def _examples(examples: Examples) -> dict[str, Any]:
    return {
        name: {"summary": summary, "value": value} for name, (summary, value) in examples.items()
    }


def _describe_properties(schemas: dict[str, Any]) -> None:
    """PROPERTIES' descriptions, for the properties whose model gives none."""
    for name, schema in schemas.items():
        fallback = PROPERTIES.get(name, {})
        for prop, subschema in schema.get("properties", {}).items():
            if "description" not in subschema and prop in fallback:
                subschema["description"] = fallback[prop]


def _used_schemas(paths: dict[str, Any], schemas: dict[str, Any]) -> dict[str, Any]:
    """The schemas `paths` refer to, directly or through other schemas (FastAPI's 422
    models and the other document's models are left out)."""
    used: dict[str, Any] = {}
    pending = _refs(paths)
    while pending:
        name = pending.pop()
        if name in used or name not in schemas:
            continue
        used[name] = schemas[name]
        pending |= _refs(schemas[name])
    used.pop("HTTPValidationError", None)
    used.pop("ValidationError", None)
    return dict(sorted(used.items()))


def _refs(node: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
            found.add(ref.rsplit("/", 1)[1])
        for value in node.values():
            found |= _refs(value)
    elif isinstance(node, list):
        for value in node:
            found |= _refs(value)
    return found
