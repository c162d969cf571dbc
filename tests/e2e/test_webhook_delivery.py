"""Deliveries on the whole stack to a real receiver on loopback (issue 5, acceptance 1 and 6):
exact bodies and headers, signatures that independent verifiers accept, the event mapping,
event filters and "*", disabled webhooks, and test/live separation."""

import json
import time
from datetime import UTC, datetime
from typing import Any

import httpx2
import pytest
import stripe
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from shared.ids import new_id
from shared.messages import PassEventMessage
from shared.models import Mode, PassSnapshot
from tests.support.api import create_pass, create_template, ok, wait_for_events
from tests.support.polling import poll
from tests.support.receiver import Receiver
from tests.support.stack import Stack
from tests.support.webhooks import (
    body_of,
    create_webhook,
    deliveries,
    publish_event,
    settled,
    verify,
)

pytestmark = pytest.mark.e2e
MAPPED = {"created": "pass.issued", "updated": "pass.update_pushed", "voided": "pass.voided"}


def _expected_body(event: dict[str, Any], pass_: dict[str, Any]) -> str:
    keys = ("id", "short_id", "mode", "holder_email", "holder_name", "field_values", "voided")
    body = {
        "id": event["id"],
        "type": MAPPED[event["type"]],
        "created_at": event["created_at"],
        "data": {
            "pass": {key: pass_[key] for key in keys},
            "event": {"type": event["type"], "metadata": event["metadata"]},
        },
    }
    return json.dumps(body, separators=(",", ":"))


def test_created_updated_and_voided_arrive_exactly_and_verifiably(
    stack: Stack, receiver: Receiver
) -> None:
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        hook = create_webhook(client, receiver.url("/exact"), list(MAPPED.values()))
        template = create_template(client)
        fields = {"holder_email": "ada@example.com", "holder_name": "Ada Lovelace"}
        created = create_pass(client, template["id"], field_values={"seat": "A12"}, **fields)
        path = f"/v1/passes/{created['id']}"
        updated = ok(client.patch(path, json={"field_values": {"seat": "B7", "row": "3"}}))
        voided = ok(client.delete(path))
        events = wait_for_events(client, created["id"], ["voided", "updated", "created"])
        records = settled(client, hook["id"], 3)
        requests = poll(lambda: receiver.requests("/exact"), lambda found: len(found) == 3)

    by_event = {body_of(request)["id"]: request for request in requests}
    record_of = {record["event_type"]: record for record in records}
    for event, pass_ in zip(reversed(events), (created, updated, voided), strict=True):
        request = by_event[event["id"]]
        webhook_type = MAPPED[event["type"]]
        assert request.body.decode() == _expected_body(event, pass_)
        record = record_of[webhook_type]
        assert (record["status"], record["attempts"], record["response_status"]) == (
            "delivered",
            1,
            200,
        )
        assert record["response_body"] == "ok"
        headers = request.headers
        assert headers["content-type"] == "application/json"
        assert headers["user-agent"] == "svc-webhooks/1.0"
        assert headers["svc-event-type"] == webhook_type
        assert headers["webhook-id"] == record["id"]
        t = headers["webhook-timestamp"]
        assert headers["svc-signature"].startswith(f"t={t},v1=")
        assert abs(time.time() - int(t)) < 60
        verify(request, hook["secret"])
        tampered = bytearray(request.body)
        tampered[len(tampered) // 2] ^= 0x01
        with pytest.raises(stripe.SignatureVerificationError):
            stripe.WebhookSignature.verify_header(
                tampered.decode(), headers["svc-signature"], hook["secret"], 300
            )
        with pytest.raises(WebhookVerificationError):
            Webhook(hook["secret"]).verify(tampered.decode(), headers)


def test_event_filters_and_star_with_downloads_and_views(stack: Stack, receiver: Receiver) -> None:
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        star = create_webhook(client, receiver.url("/star"), ["*"])
        voided_only = create_webhook(client, receiver.url("/voided"), ["pass.voided"])
        intents = create_webhook(client, receiver.url("/intent"), ["pass.add_intent"])
        issued = create_webhook(
            client, receiver.url("/issued"), ["pass.issued", "pass.added_to_wallet"]
        )
        template = create_template(client)
        pass_ = create_pass(client, template["id"])
        assert httpx2.get(pass_["url"], timeout=30).status_code == 200  # url_viewed: no type
        assert httpx2.get(pass_["download_url"], timeout=30).status_code == 200  # apple
        google = httpx2.get(f"{pass_['url']}/google", timeout=30)  # google
        assert google.status_code == 302
        wait_for_events(client, pass_["id"], ["downloaded", "downloaded", "url_viewed", "created"])
        ok(client.delete(f"/v1/passes/{pass_['id']}"))
        # A later event reaching "*" means the fan-out of every earlier one is complete.
        barrier = create_pass(client, template["id"])
        star_types = [d["event_type"] for d in settled(client, star["id"], 5)]
        assert sorted(star_types) == sorted(
            ["pass.issued", "pass.add_intent", "pass.add_intent", "pass.voided", "pass.issued"]
        )

        def types(hook: dict[str, Any]) -> list[str]:
            return sorted(d["event_type"] for d in deliveries(client, hook["id"]))

        assert types(voided_only) == ["pass.voided"]
        assert types(intents) == ["pass.add_intent", "pass.add_intent"]
        # The barrier's own delivery to this hook may trail the one to "*" by a moment.
        poll(lambda: types(issued), lambda found: found == ["pass.issued", "pass.issued"])
    poll(lambda: len(receiver.requests("/intent")), lambda n: n == 2)
    wallets = [body_of(r)["data"]["event"]["metadata"] for r in receiver.requests("/intent")]
    assert sorted(w["wallet"] for w in wallets) == ["apple", "google"]
    assert {body_of(r)["data"]["pass"]["id"] for r in receiver.requests("/issued")} == {
        pass_["id"],
        barrier["id"],
    }


def test_a_disabled_webhook_gets_nothing_for_events_while_disabled(
    stack: Stack, receiver: Receiver
) -> None:
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        witness = create_webhook(client, receiver.url("/witness"))
        paused = create_webhook(client, receiver.url("/paused"), enabled=False)
        template = create_template(client)
        pass_ = create_pass(client, template["id"])  # while disabled
        settled(client, witness["id"], 1)
        ok(client.patch(f"/v1/webhooks/{paused['id']}", json={"enabled": True}))
        ok(client.patch(f"/v1/passes/{pass_['id']}", json={"field_values": {"seat": "C1"}}))
        settled(client, witness["id"], 2)
        ok(client.patch(f"/v1/webhooks/{paused['id']}", json={"enabled": False}))
        ok(client.delete(f"/v1/passes/{pass_['id']}"))  # disabled again
        create_pass(client, template["id"])  # a barrier: the void's fan-out is done before it
        settled(client, witness["id"], 4)
        [only] = settled(client, paused["id"], 1)
    assert only["event_type"] == "pass.update_pushed"
    [request] = receiver.requests("/paused")
    assert body_of(request)["type"] == "pass.update_pushed"


def _event(account_id: str, mode: Mode) -> PassEventMessage:
    pass_id = new_id("pass")
    return PassEventMessage(
        id=new_id("pass_event"),
        account_id=account_id,
        mode=mode,
        pass_id=pass_id,
        event_type="installed",
        metadata={"wallet": "apple"},
        created_at=datetime.now(UTC),
        pass_snapshot=PassSnapshot(
            id=pass_id,
            short_id="s" * 16,
            mode=mode,
            holder_email=None,
            holder_name=None,
            field_values={},
            voided=False,
        ),
    )


def test_test_and_live_events_reach_only_their_own_mode(stack: Stack, receiver: Receiver) -> None:
    account = stack.new_account(plan="paid")
    other = stack.new_account()
    with (
        stack.client(headers=account.headers("test")) as test_client,
        stack.client(headers=account.headers("live")) as live_client,
        stack.client(headers=other.headers("test")) as other_client,
    ):
        test_hook = create_webhook(test_client, receiver.url("/test-mode"))
        live_hook = create_webhook(live_client, receiver.url("/live-mode"))
        stranger = create_webhook(other_client, receiver.url("/stranger"))
        real = create_pass(test_client, create_template(test_client)["id"])
        [created] = wait_for_events(test_client, real["id"], ["created"])
        events = [_event(account.id, "live"), _event(account.id, "test")]
        for event in [*events, _event(account.id, "live"), _event(other.id, "test")]:
            publish_event(stack.nats_url, event)
        # The stream is consumed in order: once the other account's event (published last) is
        # delivered, every earlier fan-out is complete.
        settled(other_client, stranger["id"], 1)
        test_got = settled(test_client, test_hook["id"], 2)
        live_got = settled(live_client, live_hook["id"], 2)

    def ids(path: str) -> set[str]:
        return {body_of(r)["id"] for r in receiver.requests(path)}

    poll(lambda: len(receiver.requests("/live-mode")), lambda n: n == 2)
    poll(lambda: len(receiver.requests("/test-mode")), lambda n: n == 2)
    assert ids("/test-mode") == {created["id"], events[1].id}
    assert {body_of(r)["data"]["pass"]["mode"] for r in receiver.requests("/test-mode")} == {"test"}
    assert {body_of(r)["data"]["pass"]["mode"] for r in receiver.requests("/live-mode")} == {"live"}
    assert events[0].id in ids("/live-mode")
    assert {d["event_type"] for d in live_got} == {"pass.added_to_wallet"}
    assert sorted(d["event_type"] for d in test_got) == ["pass.added_to_wallet", "pass.issued"]
    assert len(receiver.requests("/stranger")) == 1
