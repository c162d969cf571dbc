"""Durable, exactly-scheduled delivery (issue 5, acceptance 4): a webhooks service killed with
SIGKILL while retries are pending loses no delivery, and two replicas never send the same
attempt twice (the receiver counts the requests of every delivery)."""

from collections.abc import Iterator

import pytest

from tests.support.api import create_pass, create_template
from tests.support.polling import poll
from tests.support.receiver import Receiver
from tests.support.stack import Stack, new_stack, serving
from tests.support.webhooks import body_of, create_webhook, deliveries, settled

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture(scope="module")
def stack(
    nats_url: str, mongo_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    running = new_stack(nats_url, mongo_url, tmp_path_factory.mktemp("durable-stack"))
    running.extra_env = {
        "TESSERA_WEBHOOK_RETRY_SCHEDULE": "0,1,1,1,1,1,1",
        "TESSERA_WEBHOOK_TIMEOUT_SECONDS": "1",
        # A dead replica's claims are taken over 5 s after it last renewed them; a live one
        # renews them every 2 s, so only a stall of 3 s (a loaded CI machine) could pass one on.
        "TESSERA_WEBHOOKS_LEASE_SECONDS": "5",
    }
    with serving(running):
        yield running


def test_a_killed_webhooks_service_loses_no_delivery(stack: Stack, receiver: Receiver) -> None:
    receiver.behave("/crash", fail_times=3)
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        hook = create_webhook(client, receiver.url("/crash"), ["pass.issued"])
        template = create_template(client)
        passes = [create_pass(client, template["id"]) for _ in range(8)]
        poll(
            lambda: deliveries(client, hook["id"]),
            lambda found: len(found) == 8 and any(d["status"] == "failed" for d in found),
        )
        stack.kill("webhooks")
        # Events that happen while the service is down wait in the stream.
        passes += [create_pass(client, template["id"]) for _ in range(4)]
        stack.start("webhooks")
        final = settled(client, hook["id"], 12, timeout=60)
    assert {d["status"] for d in final} == {"delivered"}
    assert all(3 <= d["attempts"] <= 4 for d in final), final
    answered = {
        body_of(r)["data"]["pass"]["id"] for r in receiver.requests("/crash") if r.status == 200
    }
    assert answered == {p["id"] for p in passes}
    counts = receiver.attempts("/crash")
    for delivery in final:
        # An attempt cut short by the kill may have reached the receiver unrecorded.
        assert counts[delivery["id"]] in (delivery["attempts"], delivery["attempts"] + 1)


def test_two_replicas_never_send_an_attempt_twice(stack: Stack, receiver: Receiver) -> None:
    names = stack.replica_names("webhooks")
    if len(names) < 2:  # a stack of single processes (TESSERA_TEST_REPLICAS=1): add one
        stack.start_replica("webhooks", "webhooks-extra")
        names.append("webhooks-extra")
    receiver.behave("/pair", fail_times=3)
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        hook = create_webhook(client, receiver.url("/pair"), ["pass.issued"])
        template = create_template(client)
        for _ in range(20):
            create_pass(client, template["id"])
        final = settled(client, hook["id"], 20, timeout=60)
    # A lost lease would show in the report's services' warnings (tests/conftest.py).
    assert {(d["status"], d["attempts"]) for d in final} == {("delivered", 4)}
    counts = receiver.attempts("/pair")
    assert set(counts) == {d["id"] for d in final}
    assert set(counts.values()) == {4}  # each delivery: 4 attempts, none sent twice
    logs = stack.work_dir / "logs"
    for name in names:
        sent = (logs / f"{name}.log").read_text().count(f"to {hook['id']} attempt")
        assert sent > 0, f"replica {name} made no attempt"
