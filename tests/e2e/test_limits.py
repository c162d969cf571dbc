"""Plans, quotas and rate limits across two api replicas (issue 7, acceptance 1).

One api runs as a real process of the stack, a second in this process with a clock the test
moves (no sleeping); both count against the same MongoDB. The stack's plan table is tiny
(TESSERA_API_PLANS): free = 5 requests a day and 3 test passes a month, paid = 1,000 requests a
day and 3 test passes a month.
"""

import json
from collections.abc import Iterator

import httpx2
import pytest

from tests.support.api import assert_error, create_template, ok
from tests.support.inproc_api import InProcessApi, ManualClock, running_api
from tests.support.stack import Stack, new_stack, serving

pytestmark = pytest.mark.e2e
DAY = 86_400
PLANS = {
    "free": {
        "live_keys": False,
        "rate_limit": 5,
        "rate_window_seconds": DAY,
        "monthly_passes": {"test": 3, "live": 0},
    },
    "paid": {
        "live_keys": True,
        "rate_limit": 1_000,
        "rate_window_seconds": DAY,
        "monthly_passes": {"test": 3, "live": 3},
    },
}
RATE_HEADERS = ("ratelimit-limit", "ratelimit-remaining", "ratelimit-reset")


@pytest.fixture(scope="module")
def stack(
    nats_url: str, mongo_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    running = new_stack(nats_url, mongo_url, tmp_path_factory.mktemp("limits-stack"))
    running.extra_env = {"TESSERA_API_PLANS": json.dumps(PLANS)}
    with serving(running):
        yield running


@pytest.fixture(scope="module")
def replica(stack: Stack) -> Iterator[InProcessApi]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TESSERA_API_PLANS", json.dumps(PLANS))
        with running_api(stack, ManualClock()) as running:
            yield running


def _clients(stack: Stack, replica: InProcessApi, headers: dict[str, str]) -> list[httpx2.Client]:
    return [
        httpx2.Client(base_url=url, headers=headers, timeout=30)
        for url in (stack.base_url, replica.base_url)
    ]


def test_the_rate_limit_is_shared_by_both_replicas(stack: Stack, replica: InProcessApi) -> None:
    account = stack.new_account("free")
    first, second = _clients(stack, replica, account.headers())
    remaining = []
    for index in range(5):
        response = (first, second)[index % 2].get("/v1/templates")
        assert response.status_code == 200, response.text
        assert response.headers["ratelimit-limit"] == "5"
        remaining.append(int(response.headers["ratelimit-remaining"]))
    assert remaining == [4, 3, 2, 1, 0]
    for client in (first, second):
        response = client.get("/v1/templates")
        error = assert_error(response, 429, "rate_limit_error", code="rate_limited")
        assert "Retry-After" in error["message"] or "Retry after" in error["message"]
        retry_after = int(response.headers["retry-after"])
        assert 0 < retry_after <= DAY
        assert response.headers["ratelimit-remaining"] == "0"
        assert int(response.headers["ratelimit-reset"]) == pytest.approx(retry_after, abs=2)
    # Variant A answers its declared 400 with the message (spec 7, Variant A).
    refused = first.post(
        "/passes", json={"templateId": "x", "data": {}}, headers={"x-api-key": account.test_key}
    )
    assert refused.status_code == 400
    assert "Too many requests" in refused.json()["message"]
    assert "retry-after" in refused.headers
    # The window is per mode: the same account's other mode has its own count.
    other = stack.new_account("paid")
    assert first.get("/v1/templates", headers=other.headers("live")).status_code == 200


def test_a_new_window_admits_requests_again(stack: Stack, replica: InProcessApi) -> None:
    account = stack.new_account("free")
    real, moved = _clients(stack, replica, account.headers())
    for _ in range(5):
        ok(real.get("/v1/templates"))
    assert_error(moved.get("/v1/templates"), 429, "rate_limit_error")
    replica.clock.advance(DAY)
    try:
        response = moved.get("/v1/templates")
    finally:
        replica.clock.advance(-DAY)
    assert response.status_code == 200, response.text
    assert response.headers["ratelimit-remaining"] == "4"
    # The real-clock replica is still in the full window.
    assert_error(real.get("/v1/templates"), 429, "rate_limit_error")


def test_over_the_monthly_quota_is_402_before_any_pass_is_made(
    stack: Stack, replica: InProcessApi
) -> None:
    account = stack.new_account("paid")
    first, second = _clients(stack, replica, account.headers())
    template = create_template(first)
    # A creation that fails gives its unit back.
    assert_error(
        first.post("/v1/passes", json={"template_id": "template_nope"}), 404, "not_found_error"
    )
    for index in range(3):
        ok((first, second)[index % 2].post("/v1/passes", json={"template_id": template["id"]}))
    for client in (first, second):
        response = client.post("/v1/passes", json={"template_id": template["id"]})
        error = assert_error(response, 402, "billing_error", code="quota_exceeded")
        assert "quota" in error["message"]
    variant_a = first.post(
        "/passes",
        json={"templateId": template["id"], "data": {}},
        headers={"x-api-key": account.test_key},
    )
    assert variant_a.status_code == 400
    assert "quota" in variant_a.json()["message"]
    assert len(ok(first.get("/v1/passes", params={"limit": 100}))["data"]) == 3
    # Next month (on the replica whose clock the test moves) the quota starts again.
    replica.clock.advance(32 * DAY)
    try:
        ok(second.post("/v1/passes", json={"template_id": template["id"]}))
    finally:
        replica.clock.advance(-32 * DAY)
    assert_error(
        second.post("/v1/passes", json={"template_id": template["id"]}), 402, "billing_error"
    )


def test_replays_cost_no_quota_and_a_refused_key_works_once_the_quota_allows(
    stack: Stack, replica: InProcessApi
) -> None:
    account = stack.new_account("paid")
    first, second = _clients(stack, replica, account.headers())
    template = create_template(first)
    body = {"template_id": template["id"]}
    original = ok(first.post("/v1/passes", json=body, headers={"Idempotency-Key": "k-1"}))
    for client in (first, second, first):
        replay = client.post("/v1/passes", json=body, headers={"Idempotency-Key": "k-1"})
        assert replay.headers["idempotent-replayed"] == "true"
        assert replay.json()["id"] == original["id"]
    # The three replays took nothing: two more passes fit in the quota of three.
    ok(second.post("/v1/passes", json=body))
    ok(first.post("/v1/passes", json=body))
    # Full now, but a replay still answers with the pass it made.
    replay = second.post("/v1/passes", json=body, headers={"Idempotency-Key": "k-1"})
    assert (replay.status_code, replay.json()["id"]) == (200, original["id"])
    refused = first.post("/v1/passes", json=body, headers={"Idempotency-Key": "k-2"})
    assert_error(refused, 402, "billing_error", code="quota_exceeded")
    # The 402 was not stored against the key: next month the same request goes through.
    replica.clock.advance(32 * DAY)
    try:
        made = second.post("/v1/passes", json=body, headers={"Idempotency-Key": "k-2"})
        assert made.status_code == 200, made.text
        assert "idempotent-replayed" not in made.headers
    finally:
        replica.clock.advance(-32 * DAY)


def test_a_capability_the_plan_lacks_is_403_on_both_replicas(
    stack: Stack, replica: InProcessApi
) -> None:
    account = stack.new_account("free")
    for client in _clients(stack, replica, account.headers("live")):
        assert_error(
            client.get("/v1/templates"),
            403,
            "authorization_error",
            code="live_mode_requires_paid_plan",
        )


def test_live_keys_follow_the_plan_table(stack: Stack) -> None:
    account = stack.new_account("free")
    generous = {**PLANS, "free": {**PLANS["free"], "live_keys": True}}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TESSERA_API_PLANS", json.dumps(generous))
        with (
            running_api(stack, ManualClock()) as api,
            httpx2.Client(base_url=api.base_url, headers=account.headers("live")) as client,
        ):
            ok(client.get("/v1/templates"))


def test_every_authenticated_response_has_ratelimit_headers(
    stack: Stack, replica: InProcessApi
) -> None:
    account = stack.new_account("paid")
    for client in _clients(stack, replica, account.headers()):
        for response in (
            client.get("/v1/templates"),
            client.get("/v1/passes/pass_missing"),
            client.post("/v1/templates", json={}),
            client.get("/v1/events"),
        ):
            assert response.status_code < 500, response.text
            for name in RATE_HEADERS:
                assert name in response.headers, (response.request.url, name)
            assert response.headers["ratelimit-limit"] == "1000"
        anonymous = client.get("/v1/templates", headers={"Authorization": ""})
        assert anonymous.status_code == 401
        assert "ratelimit-limit" not in anonymous.headers
