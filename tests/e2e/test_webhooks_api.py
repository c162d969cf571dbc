"""/v1/webhooks (spec 2.6, 3.4, 4.1): subscriptions, validation, secrecy and isolation."""

from typing import Any

import pytest

from tests.support.database import dump
from tests.support.stack import Stack

pytestmark = pytest.mark.e2e
HOOK = {"url": "http://127.0.0.1:9/hook", "events": ["pass.issued", "pass.voided"]}
KEYS = {"id", "object", "url", "events", "description", "enabled", "created_at"} | {
    "disabled_reason", "disabled_at", "failing_since", "consecutive_failures",
    "max_deliveries_per_second",
}  # fmt: skip


def _error(response: Any, status: int, param: str | None) -> None:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"type", "code", "message", "param"}
    assert error["param"] == param


def test_lifecycle_and_the_secret_shown_once(stack: Stack) -> None:
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        created = client.post("/v1/webhooks", json={**HOOK, "description": "CRM"})
        assert created.status_code == 200, created.text
        hook = created.json()
        assert set(hook) == KEYS | {"secret"}
        assert hook["id"].startswith("whk_")
        assert hook["secret"].startswith("whsec_")
        assert len(hook["secret"]) >= len("whsec_") + 43  # 32 random bytes, base64
        assert hook["enabled"] is True
        fetched = client.get(f"/v1/webhooks/{hook['id']}").json()
        assert fetched == {k: v for k, v in hook.items() if k != "secret"}
        listed = client.get("/v1/webhooks").json()
        assert listed["object"] == "list"
        assert [w["id"] for w in listed["data"]] == [hook["id"]]
        assert "secret" not in listed["data"][0]

        patched = client.patch(
            f"/v1/webhooks/{hook['id']}", json={"enabled": False, "events": ["*"]}
        ).json()
        assert patched["enabled"] is False
        assert patched["events"] == ["*"]
        assert "secret" not in patched
        assert client.patch(f"/v1/webhooks/{hook['id']}", json={"enabled": True}).json()["enabled"]
        deliveries = client.get(f"/v1/webhooks/{hook['id']}/deliveries").json()
        assert deliveries == {"object": "list", "data": [], "has_more": False}

        deleted = client.delete(f"/v1/webhooks/{hook['id']}")
        assert deleted.json() == {"id": hook["id"], "deleted": True}
        _error(client.get(f"/v1/webhooks/{hook['id']}"), 404, None)
        _error(client.get(f"/v1/webhooks/{hook['id']}/deliveries"), 404, None)
        _error(client.delete(f"/v1/webhooks/{hook['id']}"), 404, None)


def test_secret_is_encrypted_at_rest_and_not_replayed(stack: Stack) -> None:
    account = stack.new_account()
    key = {"Idempotency-Key": "hook-1"}
    with stack.client(headers=account.headers()) as client:
        first = client.post("/v1/webhooks", json=HOOK, headers=key).json()
        again = client.post("/v1/webhooks", json=HOOK, headers=key)
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json() == {**first, "secret": "[redacted]"}
    dumped = dump(stack)
    secret = first["secret"]
    assert secret not in dumped
    assert secret.removeprefix("whsec_") not in dumped


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"events": ["pass.issued"]}, "url"),
        ({"url": "/relative", "events": ["pass.issued"]}, "url"),
        ({"url": "ftp://example.com/x", "events": ["pass.issued"]}, "url"),
        ({"url": "http://127.0.0.1:9/x"}, "events"),
        ({"url": "http://127.0.0.1:9/x", "events": []}, "events"),
        ({"url": "http://127.0.0.1:9/x", "events": ["pass.bogus"]}, "events"),
        ({"url": "http://127.0.0.1:9/x", "events": "pass.issued"}, "events"),
        ({**HOOK, "enabled": "yes"}, "enabled"),
        ({**HOOK, "secret": "whsec_mine"}, "secret"),
    ],
)
def test_invalid_subscriptions(stack: Stack, body: dict[str, Any], param: str) -> None:
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        _error(client.post("/v1/webhooks", json=body), 400, param)


def test_every_spec_type_and_star_are_accepted(stack: Stack) -> None:
    account = stack.new_account()
    types = [
        "pass.issued", "pass.add_intent", "pass.added_to_wallet", "pass.update_pushed",
        "pass.update_delivered", "pass.removed", "pass.voided", "pass.redeemed", "*",
    ]  # fmt: skip
    with stack.client(headers=account.headers()) as client:
        created = client.post("/v1/webhooks", json={**HOOK, "events": types})
    assert created.status_code == 200
    assert created.json()["events"] == types


def test_webhooks_are_scoped_to_account_and_mode(stack: Stack) -> None:
    owner, other = stack.new_account("paid"), stack.new_account()
    with stack.client(headers=owner.headers()) as client:
        hook = client.post("/v1/webhooks", json=HOOK).json()
    with stack.client(headers=owner.headers("live")) as live:
        _error(live.get(f"/v1/webhooks/{hook['id']}"), 404, None)
        assert live.get("/v1/webhooks").json()["data"] == []
    with stack.client(headers=other.headers()) as client:
        _error(client.get(f"/v1/webhooks/{hook['id']}"), 404, None)
        _error(client.patch(f"/v1/webhooks/{hook['id']}", json={"enabled": False}), 404, None)
        _error(client.delete(f"/v1/webhooks/{hook['id']}"), 404, None)
        _error(client.get("/v1/webhooks/whk_wrongprefixisnotfound"), 404, None)


# Control characters and whitespace in a URL (F11): urlsplit drops tab, CR and LF, so the URL
# checked and the URL sent would differ, and CR LF could split the request.
UNSAFE_URL_CHARS = ["\r", "\n", "\r\n", "\t", "\x00", "\x1b", "\x7f", "\x85", "\x9f", " ", "\xa0"]


@pytest.mark.parametrize("char", UNSAFE_URL_CHARS, ids=lambda char: repr(char))
def test_control_characters_and_whitespace_in_urls_are_refused(stack: Stack, char: str) -> None:
    account = stack.new_account()
    url = f"http://127.0.0.1:9/ho{char}ok"
    with stack.client(headers=account.headers()) as client:
        created = client.post("/v1/webhooks", json={**HOOK, "url": url, "enabled": False})
        _error(created, 400, "url")
        assert created.json()["error"]["code"] == "url_invalid"
        assert client.get("/v1/webhooks").json()["data"] == []
        hook = client.post("/v1/webhooks", json={**HOOK, "enabled": False}).json()
        _error(client.patch(f"/v1/webhooks/{hook['id']}", json={"url": url}), 400, "url")
        assert client.get(f"/v1/webhooks/{hook['id']}").json()["url"] == HOOK["url"]
    for service in ("api", "webhooks"):
        assert "Traceback" not in stack.log_text(service)


def test_the_number_of_webhooks_per_account_and_mode_is_capped(stack: Stack) -> None:
    account, other = stack.new_account(), stack.new_account()
    disabled = {**HOOK, "enabled": False}
    with stack.client(headers=account.headers()) as client:
        hooks = [client.post("/v1/webhooks", json=disabled).json() for _ in range(50)]
        assert all(hook["id"].startswith("whk_") for hook in hooks)
        refused = client.post("/v1/webhooks", json=disabled)
        _error(refused, 400, None)
        error = refused.json()["error"]
        assert (error["type"], error["code"]) == ("invalid_request_error", "webhook_limit_reached")
        assert "50 webhooks" in error["message"]
        assert len(client.get("/v1/webhooks", params={"limit": 100}).json()["data"]) == 50
        deleted = client.delete(f"/v1/webhooks/{hooks[0]['id']}")
        assert deleted.status_code == 200, deleted.text
        assert client.post("/v1/webhooks", json=disabled).status_code == 200
        _error(client.post("/v1/webhooks", json=disabled), 400, None)
    with stack.client(headers=other.headers()) as client:
        assert client.post("/v1/webhooks", json=disabled).status_code == 200
