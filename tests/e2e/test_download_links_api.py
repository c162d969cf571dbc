"""POST /v1/passes/:id/download-links (spec 2.3, 4.1, 8): validation, shape, secrecy, replay."""

from datetime import datetime, timedelta
from typing import Any

import pytest

from tests.support.api import TEMPLATE_BODY, create_template
from tests.support.database import dump
from tests.support.stack import Account, Stack

pytestmark = pytest.mark.e2e


def _pass(stack: Stack, account: Account) -> dict[str, Any]:
    with stack.client(headers=account.headers()) as client:
        created: dict[str, Any] = client.post(
            "/v1/passes", json={"template_id": create_template(client, TEMPLATE_BODY)["id"]}
        ).json()
    return created


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


@pytest.mark.parametrize(
    ("body", "expires_in"),
    [(None, 3600), ({}, 3600), ({"expires_in": 60}, 60), ({"expires_in": 604800}, 604800)],
)
def test_mint_a_link(stack: Stack, body: dict[str, Any] | None, expires_in: int) -> None:
    account = stack.new_account()
    issued = _pass(stack, account)
    with stack.client(headers=account.headers()) as client:
        response = client.post(f"/v1/passes/{issued['id']}/download-links", json=body)
    assert response.status_code == 200, response.text
    link = response.json()
    assert set(link) == {"object", "pass_id", "url", "expires_in", "expires_at", "created_at"}
    assert link["object"] == "pass.download_link"
    assert link["pass_id"] == issued["id"]
    assert link["expires_in"] == expires_in
    assert _at(link["expires_at"]) - _at(link["created_at"]) == timedelta(seconds=expires_in)
    token = link["url"].rsplit("/", 1)[1]
    assert link["url"] == f"{stack.base_url}/l/{token}"
    assert token.startswith("pdl_")
    assert len(token) - 4 >= 22  # at least 128 bits of randomness in base64url


@pytest.mark.parametrize(
    "body",
    [
        {"expires_in": 59},
        {"expires_in": 604801},
        {"expires_in": "60"},
        {"expires_in": 60.5},
        {"expires_in": None},
        {"expires_in": True},
    ],
)
def test_expires_in_out_of_range_or_not_an_integer(stack: Stack, body: dict[str, Any]) -> None:
    account = stack.new_account()
    issued = _pass(stack, account)
    with stack.client(headers=account.headers()) as client:
        response = client.post(f"/v1/passes/{issued['id']}/download-links", json=body)
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"
    assert response.json()["error"]["param"] == "expires_in"


def test_unknown_other_accounts_and_voided_passes(stack: Stack) -> None:
    owner, other = stack.new_account(), stack.new_account()
    issued = _pass(stack, owner)
    with stack.client(headers=other.headers()) as client:
        assert client.post(f"/v1/passes/{issued['id']}/download-links").status_code == 404
        assert (
            client.post("/v1/passes/pass_0000000000000000000000/download-links").status_code == 404
        )
    with stack.client(headers=owner.headers()) as client:
        client.delete(f"/v1/passes/{issued['id']}")
        voided = client.post(f"/v1/passes/{issued['id']}/download-links")
    assert voided.status_code == 400
    assert voided.json()["error"]["code"] == "pass_voided"


def test_tokens_are_stored_hashed_and_a_replay_does_not_reveal_them(stack: Stack) -> None:
    account = stack.new_account()
    issued = _pass(stack, account)
    path = f"/v1/passes/{issued['id']}/download-links"
    key = {"Idempotency-Key": "link-1"}
    with stack.client(headers=account.headers()) as client:
        first = client.post(path, json={"expires_in": 120}, headers=key)
        again = client.post(path, json={"expires_in": 120}, headers=key)
        other = client.post(path, json={"expires_in": 120})
    token = first.json()["url"].rsplit("/", 1)[1]
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json() == {**first.json(), "url": "[redacted]"}
    assert other.json()["url"] != first.json()["url"]
    dumped = dump(stack)
    assert token not in dumped
    assert token[4:] not in dumped
