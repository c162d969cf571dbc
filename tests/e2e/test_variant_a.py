"""Variant A, `POST /passes` (spec 2.8, 4.2): every declared status, the {"message"} body, and
requests and responses checked against the operation in our own OpenAPI document. The 500 while
the issuer is down is in test_crash_recovery.py, whose stack may lose its issuer."""

import base64
import io
import json
import zipfile
from typing import Any

import httpx2
import jsonschema
import pytest
from google.auth import crypt
from openapi_spec_validator import validate

from tests.support.api import TEMPLATE_BODY, all_events, create_template
from tests.support.polling import poll
from tests.support.stack import Stack
from tests.support.variant_a import check, openapi, post_passes, schema_of

pytestmark = pytest.mark.e2e


def test_the_operation_is_described_as_the_spec_declares(stack: Stack) -> None:
    document = openapi(stack)
    validate(document)
    assert document["info"]["version"] == "1.0.0"
    operation = document["paths"]["/passes"]["post"]
    assert set(operation["responses"]) == {"201", "400", "401", "404", "500"}
    assert {"name": "x-api-key", "in": "header", "required": True} | {
        "schema": {"type": "string"}
    } in operation["parameters"]
    assert operation["security"] == [{"ApiKeyAuth": []}]
    scheme = document["components"]["securitySchemes"]["ApiKeyAuth"]
    assert scheme == {"type": "apiKey", "in": "header", "name": "x-api-key"}
    request = schema_of(document)
    jsonschema.validate({"templateId": "tmpl_x", "data": {"a": None, "b": [1]}}, request)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"data": {}}, request)


def test_201_gives_a_signed_pkpass_url_and_a_verifiable_google_link(stack: Stack) -> None:
    document = openapi(stack)
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        template = create_template(client, TEMPLATE_BODY)
    data = {"seat": 14, "gate": None, "holderName": "Ada", "holderEmail": "ada@example.com"}
    response = post_passes(stack, {"templateId": template["id"], "data": data}, account.test_key)
    assert response.status_code == 201, response.text
    check(document, response)
    links = response.json()
    pkpass = httpx2.get(links["apple"])
    assert pkpass.headers["content-type"] == "application/vnd.apple.pkpass"
    pass_json = json.loads(zipfile.ZipFile(io.BytesIO(pkpass.content)).read("pass.json"))
    fields = pass_json["eventTicket"]["primaryFields"]
    assert {
        "key": "seat",
        "label": "Seat",
        "value": "14",
        "changeMessage": "Changed to %@",
    } in fields

    # Tessera's redirect, which records the add intent and signs the save link when followed.
    assert links["google"] == links["apple"].removesuffix("/pass.pkpass") + "/google"
    saved = httpx2.get(links["google"], follow_redirects=False)
    assert saved.status_code == 302
    assert saved.headers["location"].startswith("https://pay.google.com/gp/v/save/")
    # Verified by google-auth, an implementation independent of the one that signed it.
    token = saved.headers["location"].rsplit("/", 1)[1]
    signed, _, signature = token.rpartition(".")
    public_pem = (stack.work_dir / "signing" / "google-public-key.pem").read_bytes()
    verifier = crypt.RSAVerifier.from_string(public_pem)
    assert verifier.verify(signed.encode(), base64.urlsafe_b64decode(signature + "=="))
    header, claims = (json.loads(base64.urlsafe_b64decode(p + "==")) for p in signed.split("."))
    assert header["alg"] == "RS256"
    assert claims["aud"] == "google"
    assert claims["typ"] == "savetowallet"
    assert claims["origins"] == [stack.base_url]

    with stack.client(headers=account.headers()) as client:
        issued = client.get("/v1/passes").json()["data"][0]
        assert issued["holder_name"] == "Ada"
        assert issued["created_via_api"] is True
        # `created` by the POST, `downloaded` by the fetches of the apple and google URLs.
        events = poll(lambda: all_events(client), lambda found: len(found) == 3)
    assert sorted(e["type"] for e in events) == ["created", "downloaded", "downloaded"]


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"data": {}}, "templateId"),
        ({"templateId": 42, "data": {}}, "templateId"),
        ({"templateId": "tmpl_x"}, "data"),
        ({"templateId": "tmpl_x", "data": []}, "data"),
        ({"templateId": "TEMPLATE", "data": {"nope": 1}}, "nope"),
        ({"templateId": "TEMPLATE", "data": {"seat": {"row": 1}}}, "seat"),
        ({"templateId": "TEMPLATE", "data": {"holderEmail": "not-an-email"}}, "holderEmail"),
    ],
)
def test_400_for_missing_mistyped_or_invalid_input(
    stack: Stack, body: dict[str, Any], fragment: str
) -> None:
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        template = create_template(client, TEMPLATE_BODY)
    if body.get("templateId") == "TEMPLATE":
        body = {**body, "templateId": template["id"]}
    response = post_passes(stack, body, account.test_key)
    assert response.status_code == 400, response.text
    assert set(response.json()) == {"message"}
    assert fragment in response.json()["message"]
    check(openapi(stack), response)


def test_400_for_malformed_json(stack: Stack) -> None:
    account = stack.new_account()
    with stack.client() as client:
        response = client.post(
            "/passes",
            content=b"{not json",
            headers={"x-api-key": account.test_key, "Content-Type": "application/json"},
        )
    assert response.status_code == 400
    assert set(response.json()) == {"message"}


@pytest.mark.parametrize("key", [None, "", "svc_test_unknown", "Bearer x"])
def test_401_for_a_missing_or_invalid_key(stack: Stack, key: str | None) -> None:
    response = post_passes(stack, {"templateId": "tmpl_x", "data": {}}, key)
    assert response.status_code == 401
    assert set(response.json()) == {"message"}
    check(openapi(stack), response)


def test_404_for_an_unknown_template(stack: Stack) -> None:
    account = stack.new_account()
    for template_id in ("tmpl_0000000000000000000000", "not-even-an-id"):
        response = post_passes(stack, {"templateId": template_id, "data": {}}, account.test_key)
        assert response.status_code == 404
        assert set(response.json()) == {"message"}
        check(openapi(stack), response)


def test_another_accounts_template_is_404(stack: Stack) -> None:
    owner, other = stack.new_account(), stack.new_account()
    with stack.client(headers=owner.headers()) as client:
        template = create_template(client, TEMPLATE_BODY)
    response = post_passes(stack, {"templateId": template["id"], "data": {}}, other.test_key)
    assert response.status_code == 404


def test_a_key_refused_for_what_it_is_answers_401_before_the_body_is_read(stack: Stack) -> None:
    """A live key on a free plan (v1's 403) is a key Variant A refuses: 401, whatever the
    body, as authentication comes before the body's fields (docs/api-decisions.md)."""
    account = stack.new_account()  # free: no live keys
    response = post_passes(stack, {"templateId": 5, "data": {}}, account.live_key)
    assert response.status_code == 401, response.text
    assert set(response.json()) == {"message"}


def test_unknown_keys_and_templates_that_need_a_download_link_are_400(stack: Stack) -> None:
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        template = create_template(client, TEMPLATE_BODY)
        hidden = create_template(client, {**TEMPLATE_BODY, "require_download_link": True})
    # A misspelt key is refused, never silently dropped.
    extra = {"templateId": template["id"], "data": {}, "holderEmail": "ada@example.com"}
    response = post_passes(stack, extra, account.test_key)
    assert response.status_code == 400, response.text
    assert "holderEmail" in response.json()["message"]
    # Its permanent URLs answer 404 and this answer carries no pass id: no dead links.
    response = post_passes(stack, {"templateId": hidden["id"], "data": {}}, account.test_key)
    assert response.status_code == 400, response.text
    assert "download link" in response.json()["message"]
    check(openapi(stack), response)
