"""Idempotency-Key (spec 8): replays, conflicts, and one side effect under concurrency."""

import threading
from collections import Counter
from typing import Any

import pytest
from pymongo import MongoClient

from tests.support.api import TEMPLATE_BODY, all_events, all_passes, create_template
from tests.support.polling import poll
from tests.support.stack import Stack

pytestmark = pytest.mark.e2e


def test_replay_returns_the_stored_response_without_a_second_pass(stack: Stack) -> None:
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        template = create_template(client, TEMPLATE_BODY)
        body = {"template_id": template["id"], "field_values": {"seat": "B7"}}
        first = client.post("/v1/passes", json=body, headers={"Idempotency-Key": "order-1"})
        again = client.post("/v1/passes", json=body, headers={"Idempotency-Key": "order-1"})
        assert first.status_code == again.status_code == 200
        assert again.json() == first.json()
        assert again.headers["Idempotent-Replayed"] == "true"
        assert "Idempotent-Replayed" not in first.headers
        assert [p["id"] for p in all_passes(client)] == [first.json()["id"]]
        events = poll(lambda: all_events(client), lambda found: len(found) >= 1)
        assert [e["type"] for e in events] == ["created"]


def test_same_key_with_a_different_body_is_a_409(stack: Stack) -> None:
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        template = create_template(client, TEMPLATE_BODY)
        key = {"Idempotency-Key": "k-409"}
        ok = client.post("/v1/passes", json={"template_id": template["id"]}, headers=key)
        assert ok.status_code == 200
        clash = client.post(
            "/v1/passes",
            json={"template_id": template["id"], "holder_name": "Someone Else"},
            headers=key,
        )
        assert clash.status_code == 409
        error = clash.json()["error"]
        assert error["type"] == "idempotency_error"
        assert set(error) == {"type", "code", "message", "param"}
        assert len(all_passes(client)) == 1


def test_a_template_whose_policy_differs_only_by_an_explicit_null_is_a_409(
    stack: Stack,
) -> None:
    """`{}` takes the type's default (an event ticket: single use), `{"max_redemptions":
    null}` asks for unlimited: different requests, though both validate to the same dump (the
    second was answered as a replay of the first, with the single-use template)."""
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        key = {"Idempotency-Key": "template-policy"}
        body = {**TEMPLATE_BODY, "type": "event", "redemption": {}}
        first = client.post("/v1/templates", json=body, headers=key)
        assert first.status_code == 200, first.text
        assert first.json()["redemption"]["max_redemptions"] == 1
        unlimited = {**body, "redemption": {"max_redemptions": None}}
        clash = client.post("/v1/templates", json=unlimited, headers=key)
        assert clash.status_code == 409, clash.text
        assert clash.json()["error"]["code"] == "idempotency_key_reused"
        again = client.post("/v1/templates", json=body, headers=key)
        assert again.headers["Idempotent-Replayed"] == "true"


def test_keys_are_scoped_to_account_and_mode(stack: Stack) -> None:
    one, two = stack.new_account(), stack.new_account()
    key = {"Idempotency-Key": "shared-key"}
    ids = []
    for account in (one, two):
        with stack.client(headers=account.headers()) as client:
            template = create_template(client, TEMPLATE_BODY)
            response = client.post("/v1/passes", json={"template_id": template["id"]}, headers=key)
            assert response.status_code == 200
            assert "Idempotent-Replayed" not in response.headers
            ids.append(response.json()["id"])
    assert ids[0] != ids[1]


def test_a_4xx_outcome_is_replayed_too(stack: Stack) -> None:
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        body = {"template_id": "tmpl_0000000000000000000000"}
        key = {"Idempotency-Key": "missing-template"}
        first = client.post("/v1/passes", json=body, headers=key)
        again = client.post("/v1/passes", json=body, headers=key)
    assert first.status_code == again.status_code == 404
    assert again.json() == first.json()
    assert again.headers["Idempotent-Replayed"] == "true"


def test_concurrent_requests_with_one_key_make_exactly_one_pass(stack: Stack) -> None:
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        template = create_template(client, TEMPLATE_BODY)
    body = {"template_id": template["id"], "holder_name": "Ada"}
    workers = 8
    barrier = threading.Barrier(workers)
    results: list[tuple[int, dict[str, Any]]] = []
    lock = threading.Lock()

    def send() -> None:
        with stack.client(headers=account.headers()) as client:
            barrier.wait()
            response = client.post("/v1/passes", json=body, headers={"Idempotency-Key": "race"})
        with lock:
            results.append((response.status_code, response.json()))

    threads = [threading.Thread(target=send) for _ in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    statuses = Counter(status for status, _ in results)
    assert set(statuses) <= {200, 409}
    assert statuses[200] >= 1
    pass_ids = {payload["id"] for status, payload in results if status == 200}
    assert len(pass_ids) == 1
    for status, payload in results:
        if status == 409:
            assert payload["error"]["code"] == "idempotency_request_in_progress"
    with stack.client(headers=account.headers()) as client:
        assert [p["id"] for p in all_passes(client)] == list(pass_ids)
        events = poll(lambda: all_events(client), lambda found: len(found) >= 1)
        assert len(events) == 1


def test_operator_api_is_idempotent_and_never_stores_minted_keys(stack: Stack) -> None:
    key = {"Idempotency-Key": "new-customer-7", **stack.admin_headers()}
    body = {"name": "Customer Seven", "plan": "free"}
    with stack.client() as client:
        first = client.post("/admin/v1/accounts", json=body, headers=key)
        again = client.post("/admin/v1/accounts", json=body, headers=key)
    assert first.status_code == again.status_code == 201
    assert first.json()["api_keys"]["test"].startswith("svc_test_")
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json()["id"] == first.json()["id"]
    assert again.json()["api_keys"] == {"test": "[redacted]", "live": "[redacted]"}
    mongo: MongoClient[dict[str, Any]]
    with MongoClient(stack.mongo_url) as mongo:
        stored = repr(list(mongo[stack.database]["idempotency_keys"].find()))
    assert first.json()["api_keys"]["test"] not in stored
    assert first.json()["api_keys"]["live"] not in stored
