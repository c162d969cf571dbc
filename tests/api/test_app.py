"""The operator API exists only when TESSERA_ADMIN_TOKEN is set."""

from fastapi.testclient import TestClient

from services.api.app import create_app
from services.api.config import ApiSettings
from services.api.middleware import loggable_path
from services.api.openapi import operator_document


def test_without_a_token_the_operator_api_is_absent() -> None:
    client = TestClient(create_app(ApiSettings(admin_token=None)))
    response = client.post("/admin/v1/accounts", json={"name": "x", "plan": "free"})
    assert response.status_code == 404
    assert response.json()["error"]["type"] == "not_found_error"
    assert not any(
        path.startswith("/admin") for path in client.get("/openapi.json").json()["paths"]
    )


def test_with_a_token_it_is_served_but_not_in_the_public_document() -> None:
    """Its own document is served behind the token (tests/e2e/test_public_edge.py)."""
    app = create_app(ApiSettings(admin_token="t" * 40))
    public = TestClient(app).get("/openapi.json").json()["paths"]
    assert not any(path.startswith("/admin") for path in public)
    assert "/v1/passes" in public
    operator = operator_document(app)["paths"]
    assert "/admin/v1/accounts" in operator
    assert not any(path.startswith("/v1/") for path in operator)


def test_openapi_documents_objects_and_envelopes_and_never_422() -> None:
    document = TestClient(create_app(ApiSettings())).get("/openapi.json").json()
    assert "422" not in str(document["paths"])
    assert "HTTPValidationError" not in document["components"]["schemas"]
    create_pass = document["paths"]["/v1/passes"]["post"]["responses"]
    assert create_pass["200"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/PassObject"
    )
    assert create_pass["400"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/ErrorEnvelope"
    )


def test_link_tokens_and_public_page_ids_are_masked_in_access_logs() -> None:
    assert loggable_path("/l/pdl_abc-DEF_123/pass.pkpass") == "/l/[redacted]/pass.pkpass"
    assert loggable_path("/v1/passes") == "/v1/passes"
    assert loggable_path("/v1/download_links/pdl_abc") == "/v1/download_links/pdl_[redacted]"
    # A pass's short id and a bundle's id open their pages: bearer secrets too.
    assert loggable_path("/p/Ab3dE5gH7jK9") == "/p/[redacted]"
    assert loggable_path("/p/Ab3dE5gH7jK9/google") == "/p/[redacted]/google"
    assert loggable_path("/b/pbdl_0123abc.pkpasses") == "/b/[redacted].pkpasses"
    assert loggable_path("/t/tmpl_1/logo.png") == "/t/tmpl_1/logo.png"


def test_an_unreachable_store_is_a_retryable_500_in_the_envelope() -> None:
    settings = ApiSettings(mongodb_url="mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=200")
    client = TestClient(create_app(settings))
    response = client.get("/v1/templates", headers={"Authorization": "Bearer svc_test_x"})
    assert response.status_code == 500
    assert response.json()["error"] == {
        "type": "api_error",
        "code": "service_unavailable",
        "message": "The database is unavailable; retry shortly with the same Idempotency-Key.",
        "param": None,
    }
