"""Auto-disable, throttling and Retry-After on the whole stack (issue 14, section 4, acceptance 4
and 5), on two webhooks replicas, with a real receiver and short settings:
TESSERA_WEBHOOKS_DISABLE_AFTER=4 (seconds) and TESSERA_WEBHOOK_RETRY_SCHEDULE=0,4,1,1,1, so a
webhook failing since its first attempt is disabled at the second, 4 s later, and has retries
left to stop.

Times are compared as the receiver saw them (`Received.at`) against the attempt times the
store recorded, on the same machine's clock; nothing here sleeps.
"""

import json
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import httpx2
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.api import create_pass, create_template, ok
from tests.support.database import stack_db
from tests.support.polling import poll
from tests.support.receiver import Receiver
from tests.support.stack import Stack, new_stack, serving
from tests.support.webhooks import create_webhook, deliveries, settled

pytestmark = pytest.mark.e2e
DISABLE_AFTER = 4
SCHEDULE = "0,4,1,1,1"
FIRST_RETRY = 4.0  # seconds from an attempt's start to the next, by the schedule
RATE = 5
BURST = 30


@pytest.fixture(scope="module")
def stack(
    nats_url: str, mongo_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    # A disable period and a schedule of seconds, and its own store: the gauges count every
    # webhook of the database.
    running = new_stack(nats_url, mongo_url, tmp_path_factory.mktemp("health-stack"), replicas=2)
    running.extra_env = {
        "TESSERA_WEBHOOKS_DISABLE_AFTER": str(DISABLE_AFTER),
        "TESSERA_WEBHOOK_RETRY_SCHEDULE": SCHEDULE,
    }
    with serving(running):
        yield running


def _timestamp(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def _webhook(client: httpx2.Client, hook_id: str) -> dict[str, Any]:
    return ok(client.get(f"/v1/webhooks/{hook_id}"))


def _gauge(stack: Stack, name: str) -> set[float]:
    """The gauge as each webhooks replica reports it (each reads the store at the scrape)."""
    values: set[float] = set()
    for member in stack.members("webhooks"):
        url = f"http://{stack.host}:{member.port(stack.api_port)}/metrics"
        text = httpx2.get(url, timeout=10.0).text
        for family in text_string_to_metric_families(text):
            values.update(s.value for s in family.samples if s.name == name)
    return values


def _warnings(stack: Stack, hook_id: str, words: str) -> list[str]:
    lines = [json.loads(line) for line in stack.log_text("webhooks").splitlines() if line]
    return [
        line["msg"]
        for line in lines
        if line["level"] == "warning" and hook_id in line["msg"] and words in line["msg"]
    ]


def _by_id(client: httpx2.Client, hook_id: str) -> dict[str, dict[str, Any]]:
    return {d["id"]: d for d in deliveries(client, hook_id)}


def test_a_failing_webhook_is_told_then_disabled_then_recovers_what_it_missed(
    stack: Stack, receiver: Receiver
) -> None:
    path = "/failing"
    receiver.behave(path, status=500)
    failing, disabled = "tessera_webhooks_failing", "tessera_webhooks_auto_disabled"
    [failing_before] = _gauge(stack, failing)
    [disabled_before] = _gauge(stack, disabled)
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        hook = create_webhook(client, receiver.url(path), ["pass.issued"])
        template = create_template(client)
        create_pass(client, template["id"])
        # Before it is disabled: the webhook object and the gauge show the streak.
        warned = poll(
            lambda: _webhook(client, hook["id"]), lambda h: h["failing_since"] is not None
        )
        assert (warned["enabled"], warned["disabled_reason"], warned["disabled_at"]) == (
            True,
            None,
            None,
        )
        assert warned["consecutive_failures"] == 1
        assert _gauge(stack, failing) == {failing_before + 1}
        poll(lambda: _warnings(stack, hook["id"], "started failing"))
        # At the second attempt, failing for DISABLE_AFTER: disabled, with its reason.
        off = poll(lambda: _webhook(client, hook["id"]), lambda h: not h["enabled"])
        assert off["disabled_reason"] == "failing"
        assert off["disabled_at"] is not None
        assert (off["failing_since"], off["consecutive_failures"]) == (warned["failing_since"], 2)
        assert _timestamp(off["disabled_at"]) - _timestamp(off["failing_since"]) >= DISABLE_AFTER
        poll(lambda: _warnings(stack, hook["id"], "disabled: every attempt failed"))
        assert _gauge(stack, disabled) == {disabled_before + 1}
        assert _gauge(stack, failing) == {failing_before}
        # Its pending retries stop: the delivery goes dead without a third attempt.
        [first] = poll(
            lambda: deliveries(client, hook["id"]), lambda found: found[0]["status"] == "dead"
        )
        assert first["attempts"] == 2
        # An event it misses is recorded, dead, and not sent.
        create_pass(client, template["id"])
        missed, _ = settled(client, hook["id"], 2)
        assert (missed["status"], missed["attempts"], missed["response_status"]) == (
            "dead",
            0,
            None,
        )
        assert receiver.attempts(path) == Counter({first["id"]: 2})
        # Enabled again by the account: the reason and the streak are cleared.
        receiver.behave(path, status=200)
        on = ok(client.patch(f"/v1/webhooks/{hook['id']}", json={"enabled": True}))
        assert (on["enabled"], on["disabled_reason"], on["disabled_at"]) == (True, None, None)
        assert (on["failing_since"], on["consecutive_failures"]) == (None, 0)
        assert _gauge(stack, disabled) == {disabled_before}
        # Recover sends what it missed, and the retries it had left.
        url = f"/v1/webhooks/{hook['id']}/recover"
        recovery = ok(client.post(url, json={"since": first["created_at"]}))
        assert recovery["requeued"] == 2
        done = poll(
            lambda: _by_id(client, hook["id"]),
            lambda found: all(d["status"] == "delivered" for d in found.values()),
        )
    assert {(d["attempts"], d["trigger"]) for d in done.values()} == {(3, "manual"), (1, "manual")}
    assert done[first["id"]]["attempts"] == 3
    assert receiver.attempts(path) == Counter({first["id"]: 3, missed["id"]: 1})


def test_a_rate_spaces_a_burst_and_nothing_fails_for_waiting(
    stack: Stack, receiver: Receiver
) -> None:
    path = "/throttled"
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        hook = create_webhook(
            client, receiver.url(path), ["pass.issued"], max_deliveries_per_second=RATE
        )
        template = create_template(client)
        rows = [{"template_id": template["id"]}] * BURST
        ok(client.post("/v1/passes/batch", json={"passes": rows}))
        done = settled(client, hook["id"], BURST, timeout=60.0)
    # Every delivery arrived once, at its first attempt: waiting counted as no attempt.
    assert {(d["status"], d["attempts"], d["response_status"]) for d in done} == {
        ("delivered", 1, 200)
    }
    arrivals = receiver.requests(path)
    assert Counter(r.delivery_id for r in arrivals) == Counter({d["id"]: 1 for d in done})
    # At most the rate in any calendar second of the receiver, plus one at the window's edge.
    per_second = Counter(int(r.at) for r in arrivals)
    assert max(per_second.values()) <= RATE + 1, sorted(per_second.items())


def _paused(stack: Stack, hook_id: str) -> bool:
    with stack_db(stack) as db:
        found = db["webhooks"].find_one({"_id": hook_id}, {"paused_until": 1})
    return found is not None and found.get("paused_until") is not None


@contextmanager
def _answered_429(
    stack: Stack, receiver: Receiver, path: str, retry_after: str
) -> Iterator[tuple[httpx2.Client, dict[str, Any], dict[str, Any]]]:
    """A webhook whose first delivery got a 429 with this Retry-After, recorded (the endpoint
    is paused in the store), the receiver answering 200 from then on: a client of its
    account, the webhook and the delivery as recorded after the 429."""
    receiver.behave(path, status=429, headers={"Retry-After": retry_after})
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        hook = create_webhook(client, receiver.url(path), ["pass.issued"])
        create_pass(client, create_template(client)["id"])
        poll(lambda: receiver.requests(path))
        receiver.behave(path, status=200)
        [limited] = poll(
            lambda: deliveries(client, hook["id"]),
            lambda found: len(found) == 1 and found[0]["response_status"] == 429,
        )
        poll(lambda: _paused(stack, hook["id"]))
        yield client, hook, limited


def test_retry_after_pauses_every_delivery_to_the_endpoint(
    stack: Stack, receiver: Receiver
) -> None:
    path = "/retry-after"
    with _answered_429(stack, receiver, path, "2") as (client, hook, limited):
        assert (limited["status"], limited["attempts"]) == ("failed", 1)
        # Two more events while the endpoint is paused.
        template = create_template(client)
        ok(client.post("/v1/passes/batch", json={"passes": [{"template_id": template["id"]}] * 2}))
        done = settled(client, hook["id"], 3)
    first, *later = receiver.requests(path)
    assert (first.status, first.delivery_id) == (429, limited["id"])
    # The pause runs from the start of the 429's attempt; nothing, not even another
    # delivery, reached the endpoint before it ended.
    resumes = _timestamp(limited["last_attempt_at"]) + 2.0
    assert len(later) == 3
    assert min(r.at for r in later) >= resumes - 0.001
    others = [d for d in done if d["id"] != limited["id"]]
    assert {(d["status"], d["attempts"]) for d in others} == {("delivered", 1)}


def test_a_retry_after_longer_than_the_schedule_is_cut_to_the_next_retry(
    stack: Stack, receiver: Receiver
) -> None:
    path = "/retry-after-long"
    # About 31,700 years: held to the delivery's next scheduled attempt, 4 s after the first.
    with _answered_429(stack, receiver, path, "999999999999") as (client, hook, limited):
        create_pass(client, create_template(client)["id"])
        done = {d["id"]: d for d in settled(client, hook["id"], 2)}
    assert done[limited["id"]]["attempts"] == 2
    assert {(d["status"], d["trigger"]) for d in done.values()} == {("delivered", "scheduled")}
    first, *later = receiver.requests(path)
    assert first.status == 429
    resumes = _timestamp(limited["last_attempt_at"]) + FIRST_RETRY
    assert sorted(r.status for r in later) == [200, 200]
    assert min(r.at for r in later) >= resumes - 0.001
