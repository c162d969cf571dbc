"""The OpenAPI documents say enough (issue 16, section 5): every operation has a summary, a
description, a tag and examples that are valid against their schemas, every schema property a
description; Variant A has its own tag; redirects are documented as redirects. And /docs and
/redoc are Tessera's own pages with a strict CSP (in Chromium: tests/e2e/test_docs_browser.py).
"""

import re
from collections.abc import Iterator
from typing import Any

import jsonschema
import pytest
from fastapi import APIRouter, FastAPI
from fastapi.testclient import TestClient

from services.api import openapi
from services.api.app import create_app
from services.api.config import ApiSettings
from services.api.openapi_docs import OPERATIONS, OPERATOR_OPERATIONS

Operation = tuple[str, str, dict[str, Any]]
REDIRECTS = ("/p/{short_id}/google", "/l/{token}/google")


@pytest.fixture(scope="module")
def app() -> FastAPI:
    return create_app(ApiSettings(admin_token="t" * 40))


@pytest.fixture(scope="module")
def client(app: FastAPI) -> TestClient:
    return TestClient(app)


@pytest.fixture(scope="module")
def document(client: TestClient) -> dict[str, Any]:
    answer: dict[str, Any] = client.get("/openapi.json").json()
    return answer


@pytest.fixture(scope="module")
def operator(app: FastAPI) -> dict[str, Any]:
    return openapi.operator_document(app)


def operations(document: dict[str, Any]) -> Iterator[Operation]:
    for path, methods in document["paths"].items():
        for method, operation in methods.items():
            yield method.upper(), path, operation


def has_example(media: dict[str, Any]) -> bool:
    return "example" in media or bool(media.get("examples"))


def example_values(media: dict[str, Any]) -> list[Any]:
    if "example" in media:
        return [media["example"]]
    return [entry["value"] for entry in media.get("examples", {}).values()]


def undescribed_properties(name: str, schema: Any) -> Iterator[str]:
    """Dotted names of the properties under `schema` (inline ones too) with no description."""
    if isinstance(schema, dict):
        for prop, subschema in schema.get("properties", {}).items():
            if not subschema.get("description"):
                yield f"{name}.{prop}"
            yield from undescribed_properties(f"{name}.{prop}", subschema)
        for key in ("items", "additionalProperties"):
            yield from undescribed_properties(name, schema.get(key))
        for key in ("anyOf", "oneOf", "allOf"):
            for option in schema.get(key, []):
                yield from undescribed_properties(name, option)


def test_every_operation_has_a_summary_a_description_and_a_tag(document: dict[str, Any]) -> None:
    missing = [
        f"{method} {path}: {part}"
        for method, path, operation in operations(document)
        for part in ("summary", "description", "tags")
        if not operation.get(part)
    ]
    assert not missing, "\n".join(missing)
    described = {tag["name"] for tag in document["tags"] if tag.get("description")}
    untagged = {
        f"{method} {path}: {tag}"
        for method, path, operation in operations(document)
        for tag in operation["tags"]
        if tag not in described
    }
    assert not untagged, f"tags without a description in document['tags']: {sorted(untagged)}"


def test_every_request_body_has_an_example(document: dict[str, Any]) -> None:
    missing = [
        f"{method} {path}: {media_type}"
        for method, path, operation in operations(document)
        for media_type, media in operation.get("requestBody", {}).get("content", {}).items()
        if not has_example(media)
    ]
    assert not missing, "request bodies without an example:\n" + "\n".join(missing)


def test_every_success_response_has_an_example(document: dict[str, Any]) -> None:
    missing = []
    for method, path, operation in operations(document):
        successes = [s for s in operation["responses"] if s.startswith(("2", "3"))]
        if not successes:
            missing.append(f"{method} {path}: no success response at all")
        for status in successes:
            for media_type, media in operation["responses"][status].get("content", {}).items():
                binary = media.get("schema", {}).get("format") == "binary"
                if not binary and not has_example(media):
                    missing.append(f"{method} {path} {status}: {media_type}")
    assert not missing, "success responses without an example:\n" + "\n".join(missing)


def test_the_examples_are_valid_against_their_schemas(document: dict[str, Any]) -> None:
    invalid = []
    for method, path, operation in operations(document):
        parts = [("request", operation.get("requestBody", {}))]
        parts += [(status, answer) for status, answer in operation["responses"].items()]
        for where, part in parts:
            media = part.get("content", {}).get("application/json", {})
            if "schema" not in media:
                continue
            schema = {**media["schema"], "components": document["components"]}
            for value in example_values(media):
                try:
                    jsonschema.validate(value, schema)
                except jsonschema.ValidationError as error:
                    invalid.append(f"{method} {path} {where}: {error.message}")
    assert not invalid, "\n".join(invalid)


def test_every_property_of_every_schema_has_a_description(document: dict[str, Any]) -> None:
    missing = [
        prop
        for name, schema in document["components"]["schemas"].items()
        for prop in undescribed_properties(name, schema)
    ]
    assert not missing, "properties without a description:\n" + "\n".join(missing)


def test_variant_a_is_under_its_own_tag_labelled_1_0_0(document: dict[str, Any]) -> None:
    operation = document["paths"]["/passes"]["post"]
    assert operation["tags"] == ["Variant A"]
    others = [
        f"{method} {path}"
        for method, path, found in operations(document)
        if "Variant A" in found["tags"] and path != "/passes"
    ]
    assert not others
    (tag,) = [tag for tag in document["tags"] if tag["name"] == "Variant A"]
    assert "Variant A" in tag["description"]
    assert "1.0.0" in tag["description"]
    assert "1.0.0" in operation["summary"]


@pytest.mark.parametrize("path", REDIRECTS)
def test_the_google_routes_are_documented_as_redirects(document: dict[str, Any], path: str) -> None:
    responses = document["paths"][path]["get"]["responses"]
    assert not [status for status in responses if status.startswith("2")], responses
    location = responses["302"]["headers"]["Location"]
    assert location["schema"]["type"] == "string"
    assert location["example"].startswith("https://pay.google.com/")
    assert "redirect" in document["paths"][path]["get"]["summary"].lower()


def test_the_pages_answer_html_and_files_not_json(document: dict[str, Any]) -> None:
    assert set(document["paths"]["/p/{short_id}"]["get"]["responses"]["200"]["content"]) == {
        "text/html"
    }
    pkpass = document["paths"]["/p/{short_id}/pass.pkpass"]["get"]["responses"]["200"]
    assert set(pkpass["content"]) == {"application/vnd.apple.pkpass"}
    assert "410" in document["paths"]["/l/{token}"]["get"]["responses"]


def test_the_document_stays_a_valid_openapi_document(document: dict[str, Any]) -> None:
    from openapi_spec_validator import validate

    validate(document)


def test_an_entry_without_its_route_is_unused_and_a_route_without_one_keeps_a_tag() -> None:
    """`POST /v1/passes/{pass_id}/redact` has an entry whether or not the route exists yet; a
    new route without an entry still gets the reference's tag name."""
    assert ("post", "/v1/passes/{pass_id}/redact") in OPERATIONS
    router = APIRouter(prefix="/v1/passes", tags=["passes"])

    @router.get("/{pass_id}/new", summary="A new route")
    async def new_route(pass_id: str) -> dict[str, str]:
        return {"id": pass_id}

    app = FastAPI(title="t", version="1.0.0")
    app.include_router(router)
    openapi.install(app)
    document = app.openapi()
    assert list(document["paths"]) == ["/v1/passes/{pass_id}/new"]
    assert document["paths"]["/v1/passes/{pass_id}/new"]["get"]["tags"] == ["Passes"]
    assert [tag["name"] for tag in document["tags"]] == ["Passes"]


def test_the_operator_document_is_described_too(operator: dict[str, Any]) -> None:
    missing = [
        f"{method} {path}: {part}"
        for method, path, operation in operations(operator)
        for part in ("summary", "description", "tags")
        if not operation.get(part)
    ]
    assert not missing, "\n".join(missing)
    documented = {(method.lower(), path) for method, path, _ in operations(operator)}
    assert documented <= set(OPERATOR_OPERATIONS), documented - set(OPERATOR_OPERATIONS)


def directives(policy: str) -> dict[str, list[str]]:
    parsed = {}
    for directive in policy.split(";"):
        name, *values = directive.split()
        parsed[name] = values
    return parsed


def test_docs_is_swagger_ui_from_tessera_with_a_strict_csp(client: TestClient) -> None:
    page = client.get("/docs")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    policy = directives(page.headers["content-security-policy"])
    assert policy == {
        "default-src": ["'none'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'"],
        "connect-src": ["'self'"],
        "base-uri": ["'none'"],
        "form-action": ["'none'"],
        "frame-ancestors": ["'none'"],
    }
    loaded = re.findall(r'(?:src|href)="([^"]*)"', page.text)
    assert loaded, page.text
    assert all(url.startswith("/static/docs/") or url == "data:," for url in loaded), loaded
    assert "<script>" not in page.text  # no inline script
    assert 'data-openapi-url="/openapi.json"' in page.text
    for url in loaded:
        if url.startswith("/static/"):
            asset = client.get(url)
            assert asset.status_code == 200, url
            assert asset.content
            assert asset.headers["x-content-type-options"] == "nosniff"


def test_redoc_is_redoc_from_tessera_with_a_strict_csp_and_a_style_nonce(
    client: TestClient,
) -> None:
    first, second = client.get("/redoc"), client.get("/redoc")
    assert first.status_code == 200
    policy = directives(first.headers["content-security-policy"])
    # Both ReDoc's scripts carry the style nonce: the bundle gives it to the <style> elements
    # it adds while loading, the starter to the ones ReDoc adds later.
    (nonce,) = set(re.findall(r'nonce="([^"]+)"', first.text))
    assert policy == {
        "default-src": ["'none'"],
        "script-src": ["'self'"],
        "style-src": ["'self'", f"'nonce-{nonce}'"],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'"],
        "connect-src": ["'self'"],
        "worker-src": ["blob:"],
        "base-uri": ["'none'"],
        "form-action": ["'none'"],
        "frame-ancestors": ["'none'"],
    }
    assert len(nonce) >= 22
    assert nonce not in second.headers["content-security-policy"]
    loaded = re.findall(r'(?:src|href)="([^"]*)"', first.text)
    assert all(url.startswith("/static/docs/") or url == "data:," for url in loaded), loaded
    scripts = [url for url in loaded if url.endswith(".js") or ".js?" in url]
    assert [url.split("?")[0] for url in scripts] == [
        "/static/docs/redoc.standalone.js",
        "/static/docs/redoc-init.js",
    ]


def test_the_redoc_bundle_is_served_patched_to_keep_to_its_policy(client: TestClient) -> None:
    bundle = client.get("/static/docs/redoc.standalone.js").text
    assert "cdn.redoc.ly" not in bundle
    assert "n.nc=document.currentScript&&document.currentScript.nonce||void 0;" in bundle
    assert "n.nc=void 0;" not in bundle


def test_static_docs_serves_its_files_and_nothing_else(client: TestClient) -> None:
    script = client.get("/static/docs/swagger-ui-bundle.js")
    assert script.status_code == 200
    assert script.headers["content-type"].startswith("text/javascript")
    assert client.get("/static/docs/swagger-ui.css").headers["content-type"].startswith("text/css")
    for name in ("favicon.png", "core.py", "nothing.js"):
        missing = client.get(f"/static/docs/{name}")
        assert missing.status_code == 404, name
        assert missing.json()["error"]["code"] == "resource_missing"
    assert client.get("/static/docs/..%2Fapi_docs.py").status_code == 404


def test_the_reference_links_no_cdn(client: TestClient) -> None:
    for path in ("/docs", "/redoc"):
        text = client.get(path).text
        assert "cdn.jsdelivr.net" not in text
        assert "fonts.googleapis.com" not in text
        assert "fastapi.tiangolo.com" not in text


def test_the_reference_answers_head_as_every_page_does(client: TestClient) -> None:
    for path in ("/docs", "/redoc", "/static/docs/swagger-ui.css"):
        answer = client.head(path)
        assert answer.status_code == 200, path
        assert answer.content == b""
