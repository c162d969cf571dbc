"""Outcomes and the retry schedule on the whole stack (issue 5, acceptance 2 and 3), with
TESSERA_WEBHOOK_RETRY_SCHEDULE=0,1,1,1,1,1,1 and a 1-second timeout."""

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

import httpx2
import pytest

from tests.support.api import create_pass, create_template, ok
from tests.support.polling import poll
from tests.support.receiver import Receiver
from tests.support.stack import Stack, new_stack, serving
from tests.support.webhooks import body_of, create_webhook, deliveries, settled, verify

pytestmark = pytest.mark.e2e
SCHEDULE = "0,1,1,1,1,1,1"


@pytest.fixture(scope="module")
def stack(
    nats_url: str, mongo_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    running = new_stack(nats_url, mongo_url, tmp_path_factory.mktemp("retry-stack"))
    running.extra_env = {
        "TESSERA_WEBHOOK_RETRY_SCHEDULE": SCHEDULE,
        "TESSERA_WEBHOOK_TIMEOUT_SECONDS": "1",
    }
    with serving(running):
        yield running


def _at(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


@contextmanager
def _one_delivery(
    stack: Stack, receiver: Receiver, path: str, **behaviour: Any
) -> Iterator[tuple[httpx2.Client, dict[str, Any]]]:
    """A new account with one webhook at `path` and one issued pass: its client and the hook."""
    receiver.behave(path, **behaviour)
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        hook = create_webhook(client, receiver.url(path), ["pass.issued"])
        create_pass(client, create_template(client)["id"])
        yield client, hook


def test_three_failures_then_success_is_delivered_at_the_fourth_attempt(
    stack: Stack, receiver: Receiver
) -> None:
    with _one_delivery(stack, receiver, "/flaky", fail_times=3, body="fine") as (client, hook):
        failing = poll(
            lambda: deliveries(client, hook["id"]),
            lambda found: len(found) == 1 and found[0]["status"] == "failed",
        )[0]
        assert failing["response_status"] == 500
        assert failing["attempts"] in (1, 2, 3)
        gap = _at(failing["next_attempt_at"]) - _at(failing["last_attempt_at"])
        assert gap == timedelta(seconds=1)
        [done] = settled(client, hook["id"], 1)
    assert done["status"] == "delivered"
    assert done["attempts"] == 4
    assert (done["response_status"], done["response_body"], done["next_attempt_at"]) == (
        200,
        "fine",
        None,
    )
    requests = receiver.requests("/flaky")
    assert [r.status for r in requests] == [500, 500, 500, 200]
    assert {r.delivery_id for r in requests} == {done["id"]}
    assert len({r.body for r in requests}) == 1  # the same body on every attempt
    stamps = [int(r.headers["webhook-timestamp"]) for r in requests]
    assert stamps == sorted(set(stamps))  # each attempt signed afresh, a second or more apart
    for request in requests:
        verify(request, hook["secret"])
    assert _at(done["last_attempt_at"]) - _at(done["created_at"]) >= timedelta(seconds=3)


def test_an_endpoint_that_always_fails_is_dead_after_seven_attempts(
    stack: Stack, receiver: Receiver
) -> None:
    with _one_delivery(stack, receiver, "/broken", status=500, body="x" * 5000) as (client, hook):
        [dead] = settled(client, hook["id"], 1)
    assert dead["status"] == "dead"
    assert dead["attempts"] == 7
    assert dead["next_attempt_at"] is None
    assert dead["response_status"] == 500
    assert dead["response_body"] == "x" * 2000
    assert _at(dead["last_attempt_at"]) - _at(dead["created_at"]) >= timedelta(seconds=6)
    assert len(receiver.requests("/broken")) == 7


def test_a_slow_endpoint_fails_at_the_timeout_and_holds_back_no_other(
    stack: Stack, receiver: Receiver
) -> None:
    receiver.behave("/slow", delay_seconds=5.0)
    receiver.behave("/quick")
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        slow = create_webhook(client, receiver.url("/slow"))
        quick = create_webhook(client, receiver.url("/quick"))
        template = create_template(client)
        for _ in range(6):
            create_pass(client, template["id"])
        settled(client, quick["id"], 6, timeout=10)
        failed = poll(
            lambda: deliveries(client, slow["id"]),
            lambda found: len(found) == 6 and all(d["attempts"] >= 1 for d in found),
        )
        for delivery in failed:
            assert delivery["response_status"] is None
            assert delivery["response_body"] == "no response within 1 s"
        # Deleting the webhook deletes its deliveries and so ends their retries.
        ok(client.delete(f"/v1/webhooks/{slow['id']}"))
    assert {body_of(r)["type"] for r in receiver.requests("/quick")} == {"pass.issued"}


def test_a_redirect_fails_and_is_not_followed(stack: Stack, receiver: Receiver) -> None:
    moved = {"redirect_to": receiver.url("/new-home"), "body": ""}
    with _one_delivery(stack, receiver, "/moved", **moved) as (client, hook):
        [first] = poll(
            lambda: deliveries(client, hook["id"]),
            lambda found: len(found) == 1 and found[0]["attempts"] >= 1,
        )
        assert (first["status"], first["response_status"]) == ("failed", 302)
        ok(client.delete(f"/v1/webhooks/{hook['id']}"))
    assert receiver.requests("/new-home") == []
