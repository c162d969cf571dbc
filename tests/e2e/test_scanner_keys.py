"""Scanner keys on the whole stack (issue 13, acceptance 6; docs/redemption.md): made with the
account's secret key and shown once, a scanner key scans and every other route of the public
API answers 403 `scanner_key_not_allowed`; revoked, it answers 401 on the next request on every
api replica."""

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx2
import pytest

from tests.support.api import assert_error, create_pass, create_template, ok
from tests.support.stack import Stack

pytestmark = pytest.mark.e2e

KEY_OBJECT = {"id", "object", "name", "mode", "revoked", "revoked_at", "created_at"}
DUMMY_ID = "0000000000000000000000"


@dataclass
class Ctx:
    stack: Stack
    secret: httpx2.Client


@pytest.fixture
def ctx(stack: Stack) -> Iterator[Ctx]:
    account = stack.new_account()
    with stack.client(headers=account.headers("test")) as secret:
        yield Ctx(stack, secret)


def _create(client: httpx2.Client, name: str = "North gate") -> dict[str, Any]:
    created = ok(client.post("/v1/scanner_keys", json={"name": name}))
    assert set(created) == KEY_OBJECT | {"key"}, created
    return created


def _scanner(stack: Stack, key: str, base_url: str | None = None) -> httpx2.Client:
    return httpx2.Client(
        base_url=base_url or stack.base_url, headers={"Authorization": f"Bearer {key}"}, timeout=30
    )


def test_a_key_is_made_listed_and_shown_once(ctx: Ctx) -> None:
    created = _create(ctx.secret)
    assert created["id"].startswith("skey_")
    assert created["object"] == "scanner_key"
    assert (created["name"], created["mode"], created["revoked"]) == ("North gate", "test", False)
    assert re.fullmatch(r"svc_scan_test_[A-Za-z0-9_-]{32}", created["key"])
    listed = ok(ctx.secret.get("/v1/scanner_keys"))
    assert [item["id"] for item in listed["data"]] == [created["id"]]
    assert set(listed["data"][0]) == KEY_OBJECT  # never the key again
    for name in ("", "x" * 101):
        response = ctx.secret.post("/v1/scanner_keys", json={"name": name})
        assert_error(response, 400, "invalid_request_error", param="name")


def test_keys_are_listed_a_page_at_a_time(ctx: Ctx) -> None:
    made = [_create(ctx.secret)["id"] for _ in range(3)]
    first = ok(ctx.secret.get("/v1/scanner_keys", params={"limit": 2}))
    assert [item["id"] for item in first["data"]] == made[::-1][:2]
    assert first["has_more"] is True
    after = first["data"][-1]["id"]
    rest = ok(ctx.secret.get("/v1/scanner_keys", params={"limit": 2, "starting_after": after}))
    assert ([item["id"] for item in rest["data"]], rest["has_more"]) == ([made[0]], False)


def test_a_key_made_under_an_idempotency_key_is_made_once(ctx: Ctx) -> None:
    """Like every POST (spec 8): a retry after a lost answer makes no second key; the
    replay shows the key as [redacted] (shown once), and the one key is listed."""
    key = {"Idempotency-Key": "scanner-key-once"}
    first = ok(ctx.secret.post("/v1/scanner_keys", json={"name": "Gate 4"}, headers=key))
    again = ctx.secret.post("/v1/scanner_keys", json={"name": "Gate 4"}, headers=key)

    assert again.headers["Idempotent-Replayed"] == "true"
    assert ok(again) == {**first, "key": "[redacted]"}
    named = [k for k in ok(ctx.secret.get("/v1/scanner_keys"))["data"] if k["name"] == "Gate 4"]
    assert [k["id"] for k in named] == [first["id"]]
    other = ctx.secret.post("/v1/scanner_keys", json={"name": "Gate 5"}, headers=key)
    assert_error(other, 409, "idempotency_error", code="idempotency_key_reused")


def test_a_scanner_key_scans_and_nothing_else(ctx: Ctx) -> None:
    template = create_template(ctx.secret)
    ticket = create_pass(ctx.secret, template["id"])
    key = _create(ctx.secret)["key"]
    with _scanner(ctx.stack, key) as scanner:
        answer = ok(scanner.post("/v1/scans", json={"code": ticket["serial_number"]}))
        assert answer["result"] == "accepted"
        # Every other operation of the public document, whatever its parameters.
        document = ok(httpx2.get(f"{ctx.stack.base_url}/openapi.json"))
        tried = 0
        for path, operations in document["paths"].items():
            if not path.startswith("/v1/"):
                continue
            url = re.sub(r"\{[^}]+\}", f"pass_{DUMMY_ID}", path)
            for method in operations:
                if (method, path) == ("post", "/v1/scans"):
                    continue
                response = scanner.request(method.upper(), url, json={})
                if response.status_code == 415:
                    # An upload route checks the body's type before anything (for any key).
                    csv = {"Content-Type": "text/csv"}
                    response = scanner.request(method.upper(), url, content=b"a\n", headers=csv)
                assert_error(response, 403, "authorization_error", code="scanner_key_not_allowed")
                tried += 1
        assert tried >= 20
        # Variant A authenticates by its own header: refused too, in its own error shape
        # (spec 4.2 declares no 403: a key it does not accept is 401).
        response = httpx2.post(
            f"{ctx.stack.base_url}/passes",
            headers={"x-api-key": key},
            json={"templateId": template["id"], "data": {}},
        )
        assert response.status_code == 401, response.text
        assert "scanner key" in response.json()["message"]
    assert ok(ctx.secret.get(f"/v1/passes/{ticket['id']}"))["redemption_count"] == 1


def test_a_scanner_key_cannot_manage_scanner_keys(ctx: Ctx) -> None:
    made = _create(ctx.secret)
    with _scanner(ctx.stack, made["key"]) as scanner:
        for response in (
            scanner.post("/v1/scanner_keys", json={"name": "mine"}),
            scanner.get("/v1/scanner_keys"),
            scanner.delete(f"/v1/scanner_keys/{made['id']}"),
        ):
            assert_error(response, 403, "authorization_error", code="scanner_key_not_allowed")


def test_a_revoked_key_answers_401_at_once_on_every_replica(ctx: Ctx) -> None:
    made = _create(ctx.secret)
    bases = [
        f"http://{ctx.stack.host}:{member.port(ctx.stack.api_port)}"
        for member in ctx.stack.members("api")
    ]
    scanners = [_scanner(ctx.stack, made["key"], base) for base in bases]
    try:
        # Each replica has the key cached now.
        for scanner in scanners:
            assert ok(scanner.post("/v1/scans", json={"code": "nothing"}))["reason"] == (
                "unknown_code"
            )
        revoked = ok(ctx.secret.delete(f"/v1/scanner_keys/{made['id']}"))
        assert set(revoked) == KEY_OBJECT
        assert revoked["revoked"] is True
        assert revoked["revoked_at"] is not None
        for scanner in scanners:
            response = scanner.post("/v1/scans", json={"code": "nothing"})
            assert_error(response, 401, "authentication_error", code="invalid_api_key")
    finally:
        for scanner in scanners:
            scanner.close()
    # Revoking again answers the same; other accounts' keys and unknown ids are 404.
    assert ok(ctx.secret.delete(f"/v1/scanner_keys/{made['id']}"))["revoked"] is True
    other = ctx.stack.new_account()
    with ctx.stack.client(headers=other.headers("test")) as stranger:
        response = stranger.delete(f"/v1/scanner_keys/{made['id']}")
        assert_error(response, 404, "not_found_error")
    assert_error(ctx.secret.delete("/v1/scanner_keys/skey_nope"), 404, "not_found_error")
    listed = ok(ctx.secret.get("/v1/scanner_keys"))["data"]
    assert [(item["id"], item["revoked"]) for item in listed] == [(made["id"], True)]
