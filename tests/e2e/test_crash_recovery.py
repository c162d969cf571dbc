"""Crashes lose nothing: kill -9 the issuer or the events service in the middle of work; and
Variant A answers its declared 500 while the issuer is down."""

import threading
from collections import Counter
from typing import Any

import pytest

from tests.support.api import TEMPLATE_BODY, all_events, all_passes, create_template
from tests.support.polling import poll
from tests.support.stack import Account, Stack
from tests.support.variant_a import check, openapi, post_passes

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def stack(own_stack: Stack) -> Stack:
    """A stack of its own: its tests kill the issuer and the events service."""
    return own_stack


def _issue(stack: Stack, account: Account, template_id: str, key: str) -> tuple[int, Any]:
    with stack.client(headers=account.headers()) as client:
        response = client.post(
            "/v1/passes",
            json={"template_id": template_id, "holder_name": key},
            headers={"Idempotency-Key": key},
        )
    return response.status_code, response.json()


def _retry_until_settled(
    stack: Stack, account: Account, template_id: str, key: str
) -> tuple[int, Any]:
    """Retry like a client would: a transaction the dead issuer left open holds its keys until
    the store's lifetime limit (60 s), and meanwhile the retry gets a retryable write_conflict."""
    return poll(
        lambda: _issue(stack, account, template_id, key),
        lambda result: result[0] != 500 or result[1]["error"]["code"] != "write_conflict",
        timeout=90,
    )


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_kill_9_issuer_while_issuing_loses_and_duplicates_nothing(stack: Stack) -> None:
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        template = create_template(client, TEMPLATE_BODY)
    outcomes: dict[str, tuple[int, Any]] = {}
    lock = threading.Lock()
    enough = threading.Event()
    stop = threading.Event()

    def worker(number: int) -> None:
        sent = 0
        while not stop.is_set() and sent < 200:
            key = f"w{number}-{sent}"
            result = _issue(stack, account, template["id"], key)
            with lock:
                outcomes[key] = result
                if sum(1 for status, _ in outcomes.values() if status == 200) >= 20:
                    enough.set()
            sent += 1

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    assert enough.wait(60), "no passes issued before the crash"
    stack.kill("issuer")
    # Keep the workers sending into the outage for a moment: these requests fail cleanly.
    poll(lambda: sum(1 for s, _ in outcomes.values() if s != 200), lambda failed: failed >= 4)
    stop.set()
    for thread in threads:
        thread.join()
    stack.start("issuer")

    failed = {key: body for key, (status, body) in outcomes.items() if status != 200}
    assert failed, "the crash should have failed some requests"
    for body in failed.values():
        assert body["error"]["type"] == "api_error"
    succeeded = {key: body["id"] for key, (status, body) in outcomes.items() if status == 200}
    for key in failed:
        status, body = _retry_until_settled(stack, account, template["id"], key)
        assert status == 200, body
        succeeded[key] = body["id"]
    # A retry of a request whose first attempt did commit returns that same pass.
    for key in list(succeeded)[:10]:
        status, body = _issue(stack, account, template["id"], key)
        assert (status, body["id"]) == (200, succeeded[key])

    with stack.client(headers=account.headers()) as client:
        passes = all_passes(client)
        assert Counter(p["holder_name"] for p in passes) == Counter(succeeded.keys())
        assert {p["id"] for p in passes} == set(succeeded.values())
        events = poll(
            lambda: all_events(client), lambda found: len(found) >= len(succeeded), timeout=30
        )
    created = Counter(e["pass_id"] for e in events if e["type"] == "created")
    assert created == Counter(set(succeeded.values()))


@pytest.mark.slow
def test_kill_9_events_service_then_100_passes_are_recorded_once(stack: Stack) -> None:
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        template = create_template(client, TEMPLATE_BODY)
        stack.kill("events")
        issued = set()
        for _ in range(100):
            response = client.post("/v1/passes", json={"template_id": template["id"]})
            assert response.status_code == 200, response.text
            issued.add(response.json()["id"])
        assert all_events(client) == []
        stack.start("events")
        events = poll(lambda: all_events(client), lambda found: len(found) >= 100, timeout=60)
    assert len(events) == 100
    assert Counter(e["pass_id"] for e in events if e["type"] == "created") == Counter(issued)


def test_variant_a_answers_500_while_the_issuer_is_down(stack: Stack) -> None:
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        template = create_template(client, TEMPLATE_BODY)
    stack.kill("issuer")
    try:
        response = post_passes(stack, {"templateId": template["id"], "data": {}}, account.test_key)
    finally:
        stack.start("issuer")
    assert response.status_code == 500
    assert set(response.json()) == {"message"}
    check(openapi(stack), response)
