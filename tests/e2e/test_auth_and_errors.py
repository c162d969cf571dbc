"""End to end over HTTP: the operator API, API keys, plans and modes, isolation, and the error
envelope for every kind of failure (spec 5 Variant B, 7; issue 2 parts 6 and 7).
"""

import json
import re
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import httpx2
import pytest

from tests.support.api import (
    assert_error,
    create_pass,
    create_template,
    ids,
    list_page,
    ok,
    template_body,
)
from tests.support.stack import Account, Stack

pytestmark = pytest.mark.e2e

ACCOUNT_KEYS = {"id", "object", "name", "plan", "created_at"}
KEY_SHAPE = re.compile(r"^svc_(test|live)_[A-Za-z0-9_-]{22,}$")
MISSING_PASS = "pass_0000000000000000000000"


@pytest.fixture
def admin(stack: Stack) -> Iterator[httpx2.Client]:
    with stack.client(headers=stack.admin_headers()) as client:
        yield client


@pytest.fixture
def anonymous(stack: Stack) -> Iterator[httpx2.Client]:
    with stack.client() as client:
        yield client


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def new_account(admin: httpx2.Client, plan: str = "free", name: str = "Acme") -> dict[str, Any]:
    return ok(admin.post("/admin/v1/accounts", json={"name": name, "plan": plan}), 201)


# --- the operator API ---------------------------------------------------------------------


def test_create_account_shows_keys_once(admin: httpx2.Client, anonymous: httpx2.Client) -> None:
    created = new_account(admin, "free", name="Acme Ltd")
    assert set(created) == ACCOUNT_KEYS | {"api_keys"}
    assert created["id"].startswith("acct_")
    assert created["object"] == "account"
    assert created["name"] == "Acme Ltd"
    assert created["plan"] == "free"
    datetime.fromisoformat(created["created_at"])
    keys = created["api_keys"]
    assert set(keys) == {"test", "live"}
    assert keys["test"].startswith("svc_test_")
    assert keys["live"].startswith("svc_live_")
    assert KEY_SHAPE.match(keys["test"])
    assert KEY_SHAPE.match(keys["live"])
    # At least 128 random bits after the prefix (base64url: 6 bits a character).
    assert len(keys["test"]) - len("svc_test_") >= 22

    fetched = ok(admin.get(f"/admin/v1/accounts/{created['id']}"))
    assert set(fetched) == ACCOUNT_KEYS
    assert fetched == {k: v for k, v in created.items() if k != "api_keys"}
    assert keys["test"] not in str(fetched)

    r = anonymous.get("/v1/templates", headers=bearer(keys["test"]))
    assert r.status_code == 200


def test_two_accounts_get_different_keys(admin: httpx2.Client) -> None:
    one = new_account(admin)
    two = new_account(admin)
    assert one["id"] != two["id"]
    assert one["api_keys"]["test"] != two["api_keys"]["test"]
    assert one["api_keys"]["live"] != two["api_keys"]["live"]


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"name": "x", "plan": "gold"}, "plan"),
        ({"name": "x"}, "plan"),
        ({"plan": "free"}, "name"),
        ({"name": "", "plan": "free"}, "name"),
        ({"name": "x", "plan": "free", "owner": "me"}, "owner"),
    ],
)
def test_create_account_validation(admin: httpx2.Client, body: dict[str, Any], param: str) -> None:
    assert_error(
        admin.post("/admin/v1/accounts", json=body), 400, "invalid_request_error", param=param
    )


def test_patch_plan_and_live_keys(admin: httpx2.Client, anonymous: httpx2.Client) -> None:
    created = new_account(admin, "free")
    live = bearer(created["api_keys"]["live"])
    test = bearer(created["api_keys"]["test"])

    # A live key on a free plan: 403; the test key works on every plan.
    assert_error(
        anonymous.get("/v1/templates", headers=live),
        403,
        "authorization_error",
        code="live_mode_requires_paid_plan",
    )
    assert_error(
        anonymous.post("/v1/templates", json=template_body(), headers=live),
        403,
        "authorization_error",
    )
    assert anonymous.get("/v1/templates", headers=test).status_code == 200

    upgraded = ok(admin.patch(f"/admin/v1/accounts/{created['id']}", json={"plan": "paid"}))
    assert upgraded["plan"] == "paid"
    assert set(upgraded) == ACCOUNT_KEYS
    assert ok(admin.get(f"/admin/v1/accounts/{created['id']}"))["plan"] == "paid"
    assert anonymous.get("/v1/templates", headers=live).status_code == 200
    tmpl = ok(anonymous.post("/v1/templates", json=template_body(), headers=live))
    assert tmpl["id"].startswith("tmpl_")
    # This stack signs with development identities only: a live pass is refused, clearly.
    assert_error(
        anonymous.post("/v1/passes", json={"template_id": tmpl["id"]}, headers=live),
        403,
        "authorization_error",
        code="live_signing_not_configured",
    )
    assert anonymous.get("/v1/templates", headers=test).status_code == 200

    # Back to free: live keys stop working at once.
    ok(admin.patch(f"/admin/v1/accounts/{created['id']}", json={"plan": "free"}))
    assert_error(anonymous.get("/v1/templates", headers=live), 403, "authorization_error")
    assert_error(
        anonymous.get(f"/v1/templates/{tmpl['id']}", headers=live), 403, "authorization_error"
    )


def test_patch_plan_validation_and_unknown_account(admin: httpx2.Client) -> None:
    created = new_account(admin)
    assert_error(
        admin.patch(f"/admin/v1/accounts/{created['id']}", json={"plan": "enterprise"}),
        400,
        "invalid_request_error",
        param="plan",
    )
    assert_error(
        admin.patch(f"/admin/v1/accounts/{created['id']}", json={}),
        400,
        "invalid_request_error",
        param="plan",
    )
    missing = "acct_0000000000000000000000"
    assert_error(
        admin.patch(f"/admin/v1/accounts/{missing}", json={"plan": "paid"}), 404, "not_found_error"
    )
    assert_error(admin.get(f"/admin/v1/accounts/{missing}"), 404, "not_found_error")
    assert_error(admin.get("/admin/v1/accounts/nope"), 404, "not_found_error")
    assert_error(
        admin.post(f"/admin/v1/accounts/{missing}/api_keys", json={"mode": "test"}),
        404,
        "not_found_error",
    )


def test_new_key_and_revocation(admin: httpx2.Client, anonymous: httpx2.Client) -> None:
    created = new_account(admin, "paid")
    old_test = bearer(created["api_keys"]["test"])
    tmpl = ok(anonymous.post("/v1/templates", json=template_body(), headers=old_test))

    issued = ok(
        admin.post(f"/admin/v1/accounts/{created['id']}/api_keys", json={"mode": "test"}), 201
    )
    assert issued["object"] == "api_key"
    assert issued["mode"] == "test"
    assert issued["id"].startswith("key_")
    assert issued["key"].startswith("svc_test_")
    assert issued["key"] != created["api_keys"]["test"]
    new_test = bearer(issued["key"])

    # Both keys work and see the same (account, mode) objects.
    for headers in (old_test, new_test):
        assert ok(anonymous.get(f"/v1/templates/{tmpl['id']}", headers=headers))["id"] == tmpl["id"]

    revoked = ok(admin.delete(f"/admin/v1/api_keys/{issued['id']}"))
    assert revoked["id"] == issued["id"]
    assert revoked["revoked"] is True
    # Revoking again changes nothing: the key keeps the moment it was first revoked.
    again = ok(admin.delete(f"/admin/v1/api_keys/{issued['id']}"))
    assert again["revoked_at"] == revoked["revoked_at"]
    assert_error(
        anonymous.get("/v1/templates", headers=new_test),
        401,
        "authentication_error",
        code="invalid_api_key",
    )
    # The old key is untouched.
    assert anonymous.get("/v1/templates", headers=old_test).status_code == 200

    live = ok(
        admin.post(f"/admin/v1/accounts/{created['id']}/api_keys", json={"mode": "live"}), 201
    )
    assert live["key"].startswith("svc_live_")
    listed = ok(anonymous.get("/v1/templates", headers=bearer(live["key"])))
    assert listed["data"] == []  # live mode: the test template is not there
    ok(admin.delete(f"/admin/v1/api_keys/{live['id']}"))
    assert_error(
        anonymous.get("/v1/templates", headers=bearer(live["key"])), 401, "authentication_error"
    )
    assert anonymous.get("/v1/templates", headers=bearer(created["api_keys"]["live"])).is_success


def test_revoke_unknown_key_and_bad_mode(admin: httpx2.Client) -> None:
    assert_error(
        admin.delete("/admin/v1/api_keys/key_0000000000000000000000"), 404, "not_found_error"
    )
    assert_error(admin.delete("/admin/v1/api_keys/nope"), 404, "not_found_error")
    created = new_account(admin)
    assert_error(
        admin.post(f"/admin/v1/accounts/{created['id']}/api_keys", json={"mode": "prod"}),
        400,
        "invalid_request_error",
        param="mode",
    )


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong-token"},
        {"Authorization": "Basic d3Jvbmc6dG9rZW4="},
        {"Authorization": "Bearer"},
    ],
)
def test_operator_api_needs_the_admin_token(stack: Stack, headers: dict[str, str]) -> None:
    with stack.client(headers=headers) as client:
        for response in (
            client.post("/admin/v1/accounts", json={"name": "x", "plan": "free"}),
            client.get("/admin/v1/accounts/acct_0000000000000000000000"),
            client.patch("/admin/v1/accounts/acct_0000000000000000000000", json={"plan": "paid"}),
            client.delete("/admin/v1/api_keys/key_0000000000000000000000"),
        ):
            assert_error(response, 401, "authentication_error")


def test_an_api_key_is_not_an_admin_token(stack: Stack) -> None:
    account = stack.new_account("paid")
    for mode in ("test", "live"):
        with stack.client(headers=account.headers(mode)) as client:
            assert_error(
                client.post("/admin/v1/accounts", json={"name": "x", "plan": "paid"}),
                401,
                "authentication_error",
            )


# --- API key authentication ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("authorization", "code"),
    [
        (None, "missing_api_key"),
        ("", None),
        ("Bearer", None),
        ("Basic c3ZjX3Rlc3RfeDo=", None),
        ("Token svc_test_abcdefghijklmnopqrstuvwxyz", None),
        ("svc_test_abcdefghijklmnopqrstuvwxyz", None),
        ("Bearer svc_test_", None),
        ("Bearer sk_test_abcdefghijklmnopqrstuvwxyz", None),
        ("Bearer svc_test_abcdefghijklmnopqrstuvwxyzABCDEF", "invalid_api_key"),
        ("Bearer svc_live_abcdefghijklmnopqrstuvwxyzABCDEF", "invalid_api_key"),
    ],
)
def test_missing_malformed_or_unknown_key_is_401(
    stack: Stack, authorization: str | None, code: str | None
) -> None:
    headers = {} if authorization is None else {"Authorization": authorization}
    with stack.client(headers=headers) as client:
        for response in (
            client.get("/v1/templates"),
            client.get("/v1/passes"),
            client.get("/v1/events"),
            client.get(f"/v1/passes/{MISSING_PASS}"),
            client.post("/v1/templates", json=template_body()),
            client.post("/v1/passes", json={"template_id": "tmpl_0000000000000000000000"}),
        ):
            error = assert_error(response, 401, "authentication_error")
            if code is not None:
                assert error["code"] == code


def test_a_modified_valid_key_is_401(stack: Stack) -> None:
    account = stack.new_account()
    key = account.test_key
    flipped = key[:-1] + ("A" if key[-1] != "A" else "B")
    with stack.client(headers=bearer(flipped)) as client:
        assert_error(client.get("/v1/templates"), 401, "authentication_error")
    # The scheme name is case-insensitive; the key itself is not.
    with stack.client(headers={"Authorization": f"bearer {key}"}) as client:
        assert client.get("/v1/templates").status_code == 200
    with stack.client(headers=bearer(key.upper())) as client:
        assert_error(client.get("/v1/templates"), 401, "authentication_error")


def test_auth_comes_before_validation_and_lookup(stack: Stack) -> None:
    """Without a valid key nothing else is revealed: no 400 or 404 before the 401."""
    with stack.client() as client:
        assert_error(client.post("/v1/templates", json={}), 401, "authentication_error")
        assert_error(client.get("/v1/templates/nope"), 401, "authentication_error")
        assert_error(
            client.get("/v1/passes", params={"limit": "1000"}), 401, "authentication_error"
        )


@pytest.mark.parametrize("body", [b"{nope", b"[" * 100_000, b"\xff\xfe"])
def test_a_body_that_is_not_json_is_refused_only_after_authentication(
    stack: Stack, body: bytes
) -> None:
    """FastAPI reads a body before a route's dependencies run; the key still comes first."""
    account = stack.new_account()
    json_type = {"Content-Type": "application/json"}
    with stack.client() as client:
        for path in ("/v1/templates", "/v1/passes/batch", "/v1/webhooks"):
            anonymous = client.post(path, content=body, headers=json_type)
            assert_error(anonymous, 401, "authentication_error")
            known = client.post(path, content=body, headers={**json_type, **account.headers()})
            assert_error(known, 400, "invalid_request_error", code="invalid_json")
        variant_a = client.post("/passes", content=body, headers=json_type)
        assert variant_a.status_code == 401, variant_a.text
        assert set(variant_a.json()) == {"message"}
        refused = client.post(
            "/passes", content=body, headers={**json_type, "x-api-key": account.test_key}
        )
        assert refused.status_code == 400, refused.text
        admin = client.post("/admin/v1/accounts", content=body, headers=json_type)
        assert_error(admin, 401, "authentication_error")
        operator = {**json_type, **stack.admin_headers()}
        admin = client.post("/admin/v1/accounts", content=body, headers=operator)
        assert_error(admin, 400, "invalid_request_error", code="invalid_json")


def test_variant_a_answers_401_before_it_looks_at_the_body(stack: Stack) -> None:
    with stack.client() as client:
        response = client.post("/passes", json={"templateId": 5})
    assert response.status_code == 401, response.text
    assert set(response.json()) == {"message"}


# --- mode and account isolation -----------------------------------------------------------


def _without_id(error: dict[str, Any], object_id: str, placeholder: str) -> dict[str, Any]:
    return {**error, "message": error["message"].replace(object_id, placeholder)}


def test_another_accounts_objects_answer_404_like_missing_ones(stack: Stack) -> None:
    owner = stack.new_account()
    stranger = stack.new_account()
    with (
        stack.client(headers=owner.headers()) as mine,
        stack.client(headers=stranger.headers()) as theirs,
    ):
        tmpl = create_template(mine)
        pass_ = create_pass(mine, tmpl["id"], field_values={"seat": "1A"})
        missing_tmpl = "tmpl_0000000000000000000000"
        missing_pass = MISSING_PASS

        def same_as_missing(
            method: str, path: str, object_id: str, missing_id: str, body: Any = None
        ) -> None:
            foreign = theirs.request(method, path.format(object_id), json=body)
            absent = theirs.request(method, path.format(missing_id), json=body)
            foreign_error = assert_error(foreign, 404, "not_found_error")
            absent_error = assert_error(absent, 404, "not_found_error")
            assert _without_id(foreign_error, object_id, "X") == _without_id(
                absent_error, missing_id, "X"
            )
            assert set(foreign.json()) == set(absent.json()) == {"error"}

        t, p = tmpl["id"], pass_["id"]
        same_as_missing("GET", "/v1/templates/{}", t, missing_tmpl)
        same_as_missing("PATCH", "/v1/templates/{}", t, missing_tmpl, {"name": "mine now"})
        same_as_missing("DELETE", "/v1/templates/{}", t, missing_tmpl)
        same_as_missing("GET", "/v1/passes/{}", p, missing_pass)
        same_as_missing("PATCH", "/v1/passes/{}", p, missing_pass, {"metadata": {"x": 1}})
        same_as_missing("DELETE", "/v1/passes/{}", p, missing_pass)
        same_as_missing("GET", "/v1/passes/{}/events", p, missing_pass)

        foreign = theirs.post("/v1/passes", json={"template_id": t})
        absent = theirs.post("/v1/passes", json={"template_id": missing_tmpl})
        assert _without_id(assert_error(foreign, 404, "not_found_error"), t, "X") == _without_id(
            assert_error(absent, 404, "not_found_error"), missing_tmpl, "X"
        )

        # Lists of the stranger hold nothing of the owner's.
        assert t not in ids(list_page(theirs, "/v1/templates"))
        assert list_page(theirs, "/v1/passes")["data"] == []
        assert list_page(theirs, "/v1/passes", template_id=t)["data"] == []
        # The owner's objects are untouched.
        assert ok(mine.get(f"/v1/templates/{t}")) == tmpl
        assert ok(mine.get(f"/v1/passes/{p}")) == pass_


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/passes/tmpl_0000000000000000000000"),
        ("GET", "/v1/passes/psEvnt_0000000000000000000000"),
        ("GET", "/v1/passes/pass-0000000000000000000000"),
        ("GET", "/v1/passes/PASS_0000000000000000000000"),
        ("PATCH", "/v1/passes/tmpl_0000000000000000000000"),
        ("DELETE", "/v1/passes/whk_0000000000000000000000"),
        ("GET", "/v1/passes/tmpl_0000000000000000000000/events"),
        ("GET", "/v1/templates/pass_0000000000000000000000"),
        ("PATCH", "/v1/templates/acct_0000000000000000000000"),
        ("DELETE", "/v1/templates/x"),
    ],
)
def test_ids_with_a_wrong_prefix_are_404(stack: Stack, method: str, path: str) -> None:
    account = stack.new_account()
    body = {"metadata": {"a": 1}} if "passes" in path else {"name": "n"}
    with stack.client(headers=account.headers()) as client:
        response = client.request(method, path, json=body if method == "PATCH" else None)
        assert_error(response, 404, "not_found_error", code="resource_missing")


def test_a_real_id_of_another_kind_is_404(stack: Stack) -> None:
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        tmpl = create_template(client)
        pass_ = create_pass(client, tmpl["id"])
        assert_error(client.get(f"/v1/passes/{tmpl['id']}"), 404, "not_found_error")
        assert_error(client.get(f"/v1/templates/{pass_['id']}"), 404, "not_found_error")


# --- request errors -----------------------------------------------------------------------


@pytest.fixture
def account(stack: Stack) -> Account:
    return stack.new_account()


@pytest.fixture
def client(stack: Stack, account: Account) -> Iterator[httpx2.Client]:
    with stack.client(headers=account.headers()) as c:
        yield c


@pytest.mark.parametrize(
    "raw", [b"{", b'{"name": }', b"{'name': 'x'}", b'{"name": "x",}', b"nul", b"\xff\xfe"]
)
def test_malformed_json_is_400(client: httpx2.Client, raw: bytes) -> None:
    for path in ("/v1/templates", "/v1/passes"):
        response = client.post(path, content=raw, headers={"Content-Type": "application/json"})
        assert_error(response, 400, "invalid_request_error")
    response = client.patch(
        f"/v1/passes/{MISSING_PASS}", content=raw, headers={"Content-Type": "application/json"}
    )
    assert_error(response, 400, "invalid_request_error")


def test_malformed_json_names_the_problem(client: httpx2.Client) -> None:
    response = client.post(
        "/v1/templates", content=b"{", headers={"Content-Type": "application/json"}
    )
    assert_error(response, 400, "invalid_request_error", code="invalid_json")


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data",
        "text/json",
        "text/x+json",  # passed as JSON here, read as bytes by FastAPI: 400 until 2026-11-28
    ],
)
def test_wrong_content_type_is_415(client: httpx2.Client, content_type: str) -> None:
    body = b'{"name": "x", "type": "event", "apple_style": "generic", "design": {}}'
    for method, path in (("POST", "/v1/templates"), ("POST", "/v1/passes")):
        response = client.request(
            method, path, content=body, headers={"Content-Type": content_type}
        )
        assert_error(response, 415, "invalid_request_error", code="unsupported_media_type")
        assert "Request-Id" in response.headers
    assert list_page(client, "/v1/templates")["data"] == []


def test_two_content_types_are_415(client: httpx2.Client) -> None:
    """FastAPI reads the first Content-Type, the body check the last: text/plain then
    application/json passed the check and reached the route as bytes (400)."""
    body = json.dumps(template_body()).encode()
    twice = [("Content-Type", "text/plain"), ("Content-Type", "application/json")]
    response = client.post("/v1/templates", content=body, headers=twice)
    assert_error(response, 415, "invalid_request_error", code="unsupported_media_type")


def test_json_content_type_with_charset_is_accepted(client: httpx2.Client) -> None:
    response = client.post(
        "/v1/templates",
        content=json.dumps(template_body()).encode(),
        headers={"Content-Type": "application/json; charset=utf-8"},
    )
    assert response.status_code == 200, response.text


def test_body_over_the_limit_is_413(client: httpx2.Client) -> None:
    big = {"template_id": "tmpl_0000000000000000000000", "metadata": {"blob": "x" * 1_100_000}}
    response = client.post("/v1/passes", json=big)
    assert_error(response, 413, "invalid_request_error", code="body_too_large")
    assert "Request-Id" in response.headers


def test_body_just_under_the_limit_is_read(client: httpx2.Client) -> None:
    # ~1 MiB minus headroom: read, parsed and validated normally (not 413): then refused by
    # the metadata size limit, with its param.
    big = {"template_id": "tmpl_0000000000000000000000", "metadata": {"blob": "x" * 1_000_000}}
    response = client.post("/v1/passes", json=big)
    assert_error(
        response, 400, "invalid_request_error", param="metadata", code="parameter_too_large"
    )


def test_streamed_body_over_the_limit_is_413(client: httpx2.Client) -> None:
    """Without a Content-Length the limit is enforced while reading."""

    def chunks() -> Iterator[bytes]:
        yield b'{"template_id": "tmpl_0000000000000000000000", "metadata": {"blob": "'
        for _ in range(20):
            yield b"x" * 65_536
        yield b'"}}'

    response = client.post(
        "/v1/passes", content=chunks(), headers={"Content-Type": "application/json"}
    )
    assert "content-length" not in {k.lower() for k in response.request.headers}
    assert_error(response, 413, "invalid_request_error")
    assert "Request-Id" in response.headers


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/nothing"),
        ("GET", "/v2/passes"),
        ("POST", "/v1/pass"),
        ("GET", "/"),
        ("GET", "/v1/passes/pass_0000000000000000000000/links"),
        ("DELETE", "/admin/v1/everything"),
    ],
)
def test_unknown_route_is_404(client: httpx2.Client, method: str, path: str) -> None:
    response = client.request(method, path)
    assert_error(response, 404, "not_found_error")
    assert "Request-Id" in response.headers


def test_unknown_route_without_a_key_is_404_too(anonymous: httpx2.Client) -> None:
    assert_error(anonymous.get("/v1/nothing"), 404, "not_found_error")


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("PUT", "/v1/passes", {"GET", "HEAD", "POST"}),
        ("DELETE", "/v1/passes", {"GET", "HEAD", "POST"}),
        ("PATCH", "/v1/templates", {"GET", "HEAD", "POST"}),
        ("PUT", "/v1/templates/tmpl_0000000000000000000000", {"GET", "HEAD", "PATCH", "DELETE"}),
        ("POST", "/v1/passes/pass_0000000000000000000000", {"GET", "HEAD", "PATCH", "DELETE"}),
        ("POST", "/v1/passes/pass_0000000000000000000000/events", {"GET", "HEAD"}),
        ("POST", "/v1/events", {"GET", "HEAD"}),
        ("DELETE", "/v1/events", {"GET", "HEAD"}),
        ("PUT", "/admin/v1/accounts", {"GET", "HEAD", "POST"}),
    ],
)
def test_wrong_method_is_405(
    client: httpx2.Client, method: str, path: str, allow: set[str]
) -> None:
    response = client.request(method, path)
    error = assert_error(response, 405, "invalid_request_error", code="method_not_allowed")
    assert method in error["message"]
    assert "Request-Id" in response.headers
    # Allow names every method the path serves, not just the first route's.
    assert {m.strip() for m in response.headers["Allow"].split(",")} == allow


def test_every_response_has_a_request_id(stack: Stack, client: httpx2.Client) -> None:
    tmpl = create_template(client)
    responses = [
        client.get("/v1/templates"),
        client.get(f"/v1/templates/{tmpl['id']}"),
        client.post("/v1/passes", json={"template_id": tmpl["id"]}),
        client.post("/v1/passes", json={}),
        client.get(f"/v1/passes/{MISSING_PASS}"),
        client.put("/v1/passes"),
        client.get("/nowhere"),
        client.post("/v1/passes", content=b"x", headers={"Content-Type": "text/plain"}),
        client.post("/v1/passes", content=b"{", headers={"Content-Type": "application/json"}),
        client.get("/openapi.json"),
        client.get("/docs"),
    ]
    with stack.client() as anon:
        responses.append(anon.get("/v1/passes"))
        responses.append(anon.get("/admin/v1/accounts/acct_0000000000000000000000"))
    with stack.client(headers=stack.new_account().headers("live")) as live_on_free:
        responses.append(live_on_free.get("/v1/passes"))
    seen: set[str] = set()
    for response in responses:
        request_id = response.headers.get("Request-Id")
        assert request_id, (response.request.method, response.request.url, response.status_code)
        assert request_id.startswith("req_")
        seen.add(request_id)
    assert len(seen) == len(responses)


def test_openapi_and_docs(anonymous: httpx2.Client) -> None:
    spec = anonymous.get("/openapi.json")
    assert spec.status_code == 200
    document = spec.json()
    assert document["openapi"].startswith("3.")
    paths = document["paths"]
    for path in ("/v1/passes", "/v1/passes/{pass_id}", "/v1/templates", "/v1/events"):
        assert path in paths, sorted(paths)
    docs = anonymous.get("/docs")
    assert docs.status_code == 200
    assert "text/html" in docs.headers["content-type"]


def test_no_error_is_ever_422(client: httpx2.Client) -> None:
    """A sweep of bad requests: each is a 4xx in the envelope, never FastAPI's 422."""
    tmpl = create_template(client)
    pass_ = create_pass(client, tmpl["id"])
    bad: list[tuple[str, str, dict[str, Any]]] = [
        ("POST", "/v1/templates", {"json": {}}),
        ("POST", "/v1/templates", {"json": {"name": None}}),
        ("POST", "/v1/templates", {"json": template_body(design={"fields": "x"})}),
        ("POST", "/v1/passes", {"json": {"template_id": None}}),
        ("POST", "/v1/passes", {"json": {"template_id": tmpl["id"], "metadata": []}}),
        ("POST", "/v1/passes", {"json": {"template_id": tmpl["id"], "field_values": {"": 1}}}),
        ("PATCH", f"/v1/passes/{pass_['id']}", {"json": {}}),
        ("PATCH", f"/v1/passes/{pass_['id']}", {"json": {"field_values": "x"}}),
        ("PATCH", f"/v1/templates/{tmpl['id']}", {"json": {"design": {"colors": 1}}}),
        ("PATCH", f"/v1/templates/{tmpl['id']}", {"json": []}),
        ("GET", "/v1/passes", {"params": {"limit": "x"}}),
        ("GET", "/v1/passes", {"params": {"holder_email": "x"}}),
        ("GET", "/v1/templates", {"params": {"limit": "1e9"}}),
        ("GET", "/v1/events", {"params": {"limit": "-1"}}),
        ("GET", f"/v1/passes/{pass_['id']}/events", {"params": {"limit": "999"}}),
        (
            "POST",
            "/v1/passes",
            {"json": {"template_id": tmpl["id"]}, "headers": {"Idempotency-Key": ""}},
        ),
    ]
    for method, path, kwargs in bad:
        response = client.request(method, path, **kwargs)
        assert_error(response, 400, "invalid_request_error")
