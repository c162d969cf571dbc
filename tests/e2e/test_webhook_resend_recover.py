"""Resend, recover and the delivery listing's filters on the whole stack (issue 14, section 2,
acceptance 1 and 2), with a real receiver and a short retry schedule
(TESSERA_WEBHOOK_RETRY_SCHEDULE=0,0.2,0.2: a failing delivery is dead after three attempts
within a second)."""

from collections.abc import Iterator
from typing import Any

import httpx2
import pytest

from tests.support.api import assert_error, create_pass, create_template, list_page, ok, walk
from tests.support.polling import poll
from tests.support.receiver import Receiver
from tests.support.stack import Stack, new_stack, serving
from tests.support.webhooks import create_webhook, deliveries, settled, verify

pytestmark = pytest.mark.e2e
SCHEDULE = "0,0.2,0.2"
ATTEMPTS = 3


@pytest.fixture(scope="module")
def stack(
    nats_url: str, mongo_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    # A schedule of seconds, so deliveries go dead while the test waits.
    running = new_stack(nats_url, mongo_url, tmp_path_factory.mktemp("resend-stack"))
    running.extra_env = {
        "TESSERA_WEBHOOK_RETRY_SCHEDULE": SCHEDULE,
        "TESSERA_WEBHOOK_TIMEOUT_SECONDS": "1",
    }
    with serving(running):
        yield running


def _hook_with_passes(
    client: httpx2.Client, receiver: Receiver, path: str, passes: int
) -> dict[str, Any]:
    hook = create_webhook(client, receiver.url(path), ["pass.issued"])
    template = create_template(client)
    for _ in range(passes):
        create_pass(client, template["id"])
    return hook


def _resend(client: httpx2.Client, hook_id: str, delivery_id: str, **kw: Any) -> httpx2.Response:
    return client.post(f"/v1/webhooks/{hook_id}/deliveries/{delivery_id}/resend", **kw)


def _one(client: httpx2.Client, hook_id: str, delivery_id: str) -> dict[str, Any]:
    [found] = [d for d in deliveries(client, hook_id) if d["id"] == delivery_id]
    return found


def _manual_attempt(
    client: httpx2.Client, hook_id: str, delivery_id: str, attempts: int
) -> dict[str, Any]:
    """The delivery once its manual attempt, its `attempts`-th, is recorded."""
    return poll(
        lambda: _one(client, hook_id, delivery_id),
        lambda found: found["attempts"] == attempts and found["trigger"] == "manual",
    )


def test_resend_of_a_delivered_delivery_makes_a_new_signed_manual_attempt(
    stack: Stack, receiver: Receiver
) -> None:
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        hook = _hook_with_passes(client, receiver, "/resend-delivered", 1)
        [done] = settled(client, hook["id"], 1)
        assert (done["status"], done["attempts"], done["trigger"]) == ("delivered", 1, "scheduled")
        answer = ok(_resend(client, hook["id"], done["id"]))
        assert answer["object"] == "webhook_delivery"
        assert (answer["id"], answer["status"]) == (done["id"], "delivered")
        again = _manual_attempt(client, hook["id"], done["id"], 2)
    assert again["status"] == "delivered"
    first, second = receiver.requests("/resend-delivered")
    assert first.delivery_id == second.delivery_id == done["id"]
    assert first.body == second.body
    verify(second, hook["secret"])
    assert int(second.headers["webhook-timestamp"]) >= int(first.headers["webhook-timestamp"])


def test_resend_of_a_dead_delivery_attempts_it_again_and_keeps_it_dead_if_it_fails(
    stack: Stack, receiver: Receiver
) -> None:
    receiver.behave("/resend-dead", status=500)
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        hook = _hook_with_passes(client, receiver, "/resend-dead", 1)
        [dead] = settled(client, hook["id"], 1)
        assert (dead["status"], dead["attempts"]) == ("dead", ATTEMPTS)
        # Still failing: the manual attempt is recorded, the delivery stays dead.
        ok(_resend(client, hook["id"], dead["id"]))
        failed_again = _manual_attempt(client, hook["id"], dead["id"], ATTEMPTS + 1)
        assert (failed_again["status"], failed_again["next_attempt_at"]) == ("dead", None)
        receiver.behave("/resend-dead", status=200)
        ok(_resend(client, hook["id"], dead["id"]))
        delivered = _manual_attempt(client, hook["id"], dead["id"], ATTEMPTS + 2)
    assert (delivered["status"], delivered["response_status"]) == ("delivered", 200)
    requests = receiver.requests("/resend-dead")
    assert [r.status for r in requests] == [500] * (ATTEMPTS + 1) + [200]
    for request in requests:
        verify(request, hook["secret"])


def test_resend_is_idempotent_by_key_and_only_for_the_accounts_own_deliveries(
    stack: Stack, receiver: Receiver
) -> None:
    owner, stranger = stack.new_account(plan="paid"), stack.new_account()
    with stack.client(headers=owner.headers()) as client:
        hook = _hook_with_passes(client, receiver, "/resend-owned", 1)
        [done] = settled(client, hook["id"], 1)
        key = {"Idempotency-Key": "resend-once"}
        first = ok(_resend(client, hook["id"], done["id"], headers=key))
        assert ok(_resend(client, hook["id"], done["id"], headers=key)) == first
        _manual_attempt(client, hook["id"], done["id"], 2)
        missing = _resend(client, hook["id"], "whd_" + "0" * 22)
        assert_error(missing, 404, "not_found_error", "delivery_id", "resource_missing")
        assert_error(_resend(client, hook["id"], "nope"), 404, "not_found_error", "delivery_id")
    with stack.client(headers=stranger.headers()) as client:
        # Another account's delivery, through its webhook or through one of this account's.
        assert_error(_resend(client, hook["id"], done["id"]), 404, "not_found_error", None)
        # The webhook is not this account's whatever the delivery id (it said `delivery_id`).
        assert_error(_resend(client, hook["id"], "nope"), 404, "not_found_error", None)
        own = create_webhook(client, receiver.url("/resend-stranger"), ["pass.issued"])
        through_own = _resend(client, own["id"], done["id"])
        assert_error(through_own, 404, "not_found_error", "delivery_id", "resource_missing")
    with stack.client(headers=owner.headers("live")) as client:
        # The same account in the other mode does not see it either.
        assert_error(_resend(client, hook["id"], done["id"]), 404, "not_found_error", None)
    assert len(receiver.requests("/resend-owned")) == 2


def _dead_batch(client: httpx2.Client, hook: dict[str, Any], passes: int) -> list[str]:
    """Issue `passes` passes and wait until their deliveries are dead; their ids, newest first."""
    before = {d["id"] for d in deliveries(client, hook["id"])}
    template = create_template(client)
    for _ in range(passes):
        create_pass(client, template["id"])
    found = settled(client, hook["id"], len(before) + passes)
    batch = [d for d in found if d["id"] not in before]
    assert all(d["status"] == "dead" for d in batch), batch
    return [d["id"] for d in batch]


def _created_at(client: httpx2.Client, hook_id: str, delivery_id: str) -> str:
    created: str = _one(client, hook_id, delivery_id)["created_at"]
    return created


def test_recover_after_an_outage_delivers_every_dead_delivery_in_the_range_once_more(
    stack: Stack, receiver: Receiver
) -> None:
    path = "/outage"
    receiver.behave(path, status=500)
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        hook = create_webhook(client, receiver.url(path), ["pass.issued"])
        before = _dead_batch(client, hook, 2)
        during = _dead_batch(client, hook, 3)
        after = _dead_batch(client, hook, 2)
        since = _created_at(client, hook["id"], during[-1])  # the oldest of the range
        until = _created_at(client, hook["id"], after[-1])  # excluded
        receiver.behave(path, status=200)  # the receiver is back
        recovery = ok(
            client.post(f"/v1/webhooks/{hook['id']}/recover", json={"since": since, "until": until})
        )
        assert recovery["object"] == "webhook_recovery"
        assert (recovery["webhook_id"], recovery["requeued"]) == (hook["id"], 3)
        assert (recovery["since"], recovery["until"]) == (since, until)
        poll(
            lambda: deliveries(client, hook["id"]),
            lambda found: all(
                d["status"] == "delivered" and d["trigger"] == "manual"
                for d in found
                if d["id"] in during
            ),
        )
        # Then the rest, with until left out (up to now): the latest outage alone.
        rest = ok(
            client.post(f"/v1/webhooks/{hook['id']}/recover", json={"since": until, "until": None})
        )
        assert rest["requeued"] == 2
        final = poll(
            lambda: deliveries(client, hook["id"]),
            lambda found: all(d["status"] == "delivered" for d in found if d["id"] in after),
        )
    by_id = {d["id"]: d for d in final}
    for delivery_id in before:
        assert (by_id[delivery_id]["status"], by_id[delivery_id]["attempts"]) == ("dead", ATTEMPTS)
    counts = receiver.attempts(path)
    assert {counts[d] for d in during + after} == {ATTEMPTS + 1}  # delivered once more, once
    assert {counts[d] for d in before} == {ATTEMPTS}
    assert all(by_id[d]["attempts"] == ATTEMPTS + 1 for d in during + after)


def test_recover_refuses_bad_ranges_and_other_accounts_webhooks(
    stack: Stack, receiver: Receiver
) -> None:
    owner, stranger = stack.new_account(), stack.new_account()
    with stack.client(headers=owner.headers()) as client:
        hook = create_webhook(client, receiver.url("/recover-checks"), ["pass.issued"])
        url = f"/v1/webhooks/{hook['id']}/recover"
        bad: list[tuple[Any, str | None]] = [
            ({}, "since"),
            ({"until": None}, "since"),
            ({"since": "2024-05-01T12:00:00"}, "since"),  # no offset
            ({"since": "2024-05-01"}, "since"),
            ({"since": 1714564800}, "since"),
            # Numeric text, which pydantic read as Unix seconds: since 1970, everything.
            ({"since": "20240501"}, "since"),
            ({"since": "-1"}, "since"),
            ({"since": "2024-05-01T12:00:00Z", "until": "1714600000000"}, "until"),
            ({"since": "yesterday"}, "since"),
            ({"since": "0001-01-01T00:00:00+05:00"}, "since"),
            ({"since": "2024-05-01T12:00:00Z", "until": "2024-05-01T11:59:59Z"}, "until"),
            ({"since": "2024-05-01T12:00:00Z", "until": "soon"}, "until"),
            ({"since": "2024-05-01T12:00:00Z", "status": "dead"}, "status"),
            ([], None),
        ]
        for body, param in bad:
            assert_error(client.post(url, json=body), 400, "invalid_request_error", param)
        empty = ok(client.post(url, json={"since": "2024-05-01T14:00:00+02:00"}))
        assert (empty["since"], empty["requeued"]) == ("2024-05-01T12:00:00.000Z", 0)
        assert empty["until"] == empty["created_at"]
        # Nothing is sent to a disabled webhook, so neither is asked of one.
        ok(client.patch(f"/v1/webhooks/{hook['id']}", json={"enabled": False}))
        disabled = client.post(url, json={"since": "2024-05-01T12:00:00Z"})
        assert_error(disabled, 400, "invalid_request_error", None, "webhook_disabled")
    with stack.client(headers=stranger.headers()) as client:
        refused = client.post(url, json={"since": "2024-05-01T12:00:00Z"})
        assert_error(refused, 404, "not_found_error", None, "resource_missing")
    # Client mistakes are answered, not logged as failures.
    assert "Traceback" not in stack.log_text("api") + stack.log_text("webhooks")


def test_the_delivery_listing_filters_by_status_and_event_type_and_pages(
    stack: Stack, receiver: Receiver
) -> None:
    receiver.behave("/listing-dead", status=500)
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        failing = create_webhook(
            client, receiver.url("/listing-dead"), ["pass.issued", "pass.voided"]
        )
        healthy = create_webhook(client, receiver.url("/listing-good"), ["pass.issued"])
        template = create_template(client)
        passes = [create_pass(client, template["id"]) for _ in range(3)]
        ok(client.delete(f"/v1/passes/{passes[0]['id']}"))
        everything = settled(client, failing["id"], 4)
        settled(client, healthy["id"], 3)
        path = f"/v1/webhooks/{failing['id']}/deliveries"

        def listed(**params: Any) -> list[str]:
            return [d["id"] for d in list_page(client, path, **params)["data"]]

        voided = [d["id"] for d in everything if d["event_type"] == "pass.voided"]
        issued = [d["id"] for d in everything if d["event_type"] == "pass.issued"]
        assert (len(voided), len(issued)) == (1, 3)
        assert listed(status="dead") == [d["id"] for d in everything]
        assert listed(status="delivered") == []
        assert listed(event_type="pass.issued") == issued
        assert listed(event_type="pass.voided") == voided
        assert listed(status="dead", event_type="pass.voided") == voided
        assert listed(event_type="pass.redeemed") == []
        good = f"/v1/webhooks/{healthy['id']}/deliveries"
        assert len(list_page(client, good, status="delivered")["data"]) == 3
        assert list_page(client, good, status="dead")["data"] == []
        # Cursors over a filtered listing.
        assert [d["id"] for d in walk(client, path, 2, status="dead")] == listed()
        first = list_page(client, path, limit=1, event_type="pass.issued")
        assert ([d["id"] for d in first["data"]], first["has_more"]) == (issued[:1], True)
        assert listed(event_type="pass.issued", ending_before=issued[-1]) == issued[:-1]
        refusals: list[tuple[dict[str, Any], str]] = [
            ({"status": "lost"}, "status"),
            ({"event_type": "*"}, "event_type"),
            ({"event_type": "pass.unknown"}, "event_type"),
            ({"limit": 0}, "limit"),
            ({"limit": 101}, "limit"),
            ({"starting_after": "pass_" + "0" * 22}, "starting_after"),
        ]
        for params, param in refusals:
            response = client.get(path, params=params)
            assert_error(response, 400, "invalid_request_error", param)
