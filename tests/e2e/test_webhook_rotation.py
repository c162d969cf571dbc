"""Secret rotation on the whole stack (issue 14 section 3, acceptance 3): during the grace
period every delivery carries both signatures and stripe-python and standardwebhooks each
verify it with the old secret and with the new one; after the grace period only the new secret
verifies; a grace of 0 drops every earlier secret at once. Also the rotate_secret endpoint's
validation, replays and isolation, and the webhook object's new fields."""

import time
from typing import Any

import httpx2
import pytest
import stripe
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from services.webhooks.secretbox import new_secret
from services.webhooks.signing import standard_signature, stripe_signature
from tests.support.api import create_pass, create_template, ok
from tests.support.database import stack_db
from tests.support.polling import poll
from tests.support.receiver import Received, Receiver
from tests.support.stack import Stack
from tests.support.webhooks import create_webhook

pytestmark = pytest.mark.e2e
NEW_FIELDS = {
    "disabled_reason": None,
    "disabled_at": None,
    "failing_since": None,
    "consecutive_failures": 0,
    "max_deliveries_per_second": None,
}


def _rotate(client: httpx2.Client, webhook_id: str, **body: Any) -> dict[str, Any]:
    return ok(client.post(f"/v1/webhooks/{webhook_id}/rotate_secret", json=body))


def _delivered(client: httpx2.Client, receiver: Receiver, path: str, template_id: str) -> Received:
    """Issue a pass and answer the request its pass.issued delivery made to `path`."""
    pass_id = create_pass(client, template_id)["id"]

    def arrived() -> list[Received]:
        return [r for r in receiver.requests(path) if f'"id":"{pass_id}"' in r.body.decode()]

    return poll(arrived, lambda found: len(found) == 1)[0]


def _stripe_accepts(request: Received, secret: str) -> bool:
    try:
        stripe.WebhookSignature.verify_header(
            request.body.decode(), request.headers["svc-signature"], secret, 300
        )
    except stripe.SignatureVerificationError:
        return False
    return True


def _standard_accepts(request: Received, secret: str) -> bool:
    try:
        Webhook(secret).verify(request.body.decode(), request.headers)
    except WebhookVerificationError:
        return False
    return True


def _accepted_by(request: Received, secret: str) -> tuple[bool, bool]:
    """Whether stripe-python and standardwebhooks each accept the request with `secret`."""
    return _stripe_accepts(request, secret), _standard_accepts(request, secret)


def _signed_with(request: Received, secrets: list[str]) -> None:
    """The signature headers are exactly those of `secrets`, in that order."""
    headers, body = request.headers, request.body.decode()
    t = int(headers["webhook-timestamp"])
    assert headers["svc-signature"] == stripe_signature(secrets, t, body)
    assert headers["webhook-signature"] == standard_signature(
        secrets, headers["webhook-id"], t, body
    )


def test_during_the_grace_period_both_secrets_verify_with_both_libraries(
    stack: Stack, receiver: Receiver
) -> None:
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        hook = create_webhook(client, receiver.url("/grace"), ["pass.issued"])
        template = create_template(client)
        rotated = _rotate(client, hook["id"], grace_period_seconds=3600)
        request = _delivered(client, receiver, "/grace", template["id"])
    old, new = hook["secret"], rotated["secret"]
    assert new.startswith("whsec_")
    assert new != old
    assert {k: v for k, v in rotated.items() if k != "secret"} == {
        k: v for k, v in hook.items() if k != "secret"
    }
    assert request.headers["svc-signature"].count(",v1=") == 2
    assert len(request.headers["webhook-signature"].split(" ")) == 2
    _signed_with(request, [new, old])
    assert _accepted_by(request, old) == (True, True)
    assert _accepted_by(request, new) == (True, True)
    assert _accepted_by(request, new_secret()) == (False, False)


def test_after_the_grace_period_only_the_new_secret_verifies(
    stack: Stack, receiver: Receiver
) -> None:
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        hook = create_webhook(client, receiver.url("/after"), ["pass.issued"])
        template = create_template(client)
        rotated = _rotate(client, hook["id"], grace_period_seconds=2)
        # The grace period ends at most 2 s after the answer: an attempt stamped at or after
        # that second was made after it.
        ended = time.time() + 2
        request = poll(
            lambda: _delivered(client, receiver, "/after", template["id"]),
            lambda found: int(found.headers["webhook-timestamp"]) >= ended,
            timeout=30,
            interval=0.25,
            message="an attempt after the grace period",
        )
    old, new = hook["secret"], rotated["secret"]
    _signed_with(request, [new])
    assert _accepted_by(request, new) == (True, True)
    assert _accepted_by(request, old) == (False, False)


def test_a_grace_of_zero_drops_every_earlier_secret_at_once(
    stack: Stack, receiver: Receiver
) -> None:
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        hook = create_webhook(client, receiver.url("/leaked"), ["pass.issued"])
        template = create_template(client)
        in_grace = _rotate(client, hook["id"], grace_period_seconds=86400)
        rotated = _rotate(client, hook["id"], grace_period_seconds=0)
        request = _delivered(client, receiver, "/leaked", template["id"])
    _signed_with(request, [rotated["secret"]])
    assert _accepted_by(request, rotated["secret"]) == (True, True)
    for earlier in (hook["secret"], in_grace["secret"]):
        assert _accepted_by(request, earlier) == (False, False)


def test_the_default_grace_and_a_replay_that_rotates_once(stack: Stack, receiver: Receiver) -> None:
    account = stack.new_account()
    key = {"Idempotency-Key": "rotate-1"}
    with stack.client(headers=account.headers()) as client:
        hook = create_webhook(client, receiver.url("/replay"), ["pass.issued"])
        template = create_template(client)
        path = f"/v1/webhooks/{hook['id']}/rotate_secret"
        first = ok(client.post(path, headers=key))  # no body: the default grace, a day
        again = client.post(path, headers=key)
        assert again.headers["Idempotent-Replayed"] == "true"
        assert again.json() == {**first, "secret": "[redacted]"}
        request = _delivered(client, receiver, "/replay", template["id"])
    _signed_with(request, [first["secret"], hook["secret"]])


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"grace_period_seconds": -1}, "grace_period_seconds"),
        ({"grace_period_seconds": 604801}, "grace_period_seconds"),
        ({"grace_period_seconds": "60"}, "grace_period_seconds"),
        ({"grace_period_seconds": 1.5}, "grace_period_seconds"),
        ({"grace_period_seconds": True}, "grace_period_seconds"),
        ({"grace_period_seconds": None}, "grace_period_seconds"),
        ({"grace": 60}, "grace"),
    ],
)
def test_bad_rotations_are_refused_and_change_nothing(
    stack: Stack, receiver: Receiver, body: dict[str, Any], param: str
) -> None:
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        hook = create_webhook(client, receiver.url("/bad"), ["pass.issued"], enabled=False)
        refused = client.post(f"/v1/webhooks/{hook['id']}/rotate_secret", json=body)
        assert refused.status_code == 400, refused.text
        assert refused.json()["error"]["param"] == param
    with stack_db(stack) as db:
        stored = db["webhooks"].find_one({"_id": hook["id"]})
    assert stored is not None
    assert stored.get("previous_secrets", []) == []
    assert "Traceback" not in stack.log_text("api")


def test_only_the_owner_can_rotate(stack: Stack, receiver: Receiver) -> None:
    owner, other = stack.new_account("paid"), stack.new_account()
    with stack.client(headers=owner.headers()) as client:
        hook = create_webhook(client, receiver.url("/owned"), ["pass.issued"], enabled=False)
    for headers in (other.headers(), owner.headers("live")):
        with stack.client(headers=headers) as client:
            missing = client.post(f"/v1/webhooks/{hook['id']}/rotate_secret", json={})
            assert missing.status_code == 404, missing.text
    with stack.client(headers=owner.headers()) as client:
        wrong = client.post("/v1/webhooks/pass_0LwQ5oSxXr9eHg2mNw7PtA/rotate_secret", json={})
        assert wrong.status_code == 404


def test_the_webhook_object_shows_its_health_and_throttle(stack: Stack, receiver: Receiver) -> None:
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        hook = create_webhook(client, receiver.url("/fields"), ["pass.issued"], enabled=False)
        assert {key: hook[key] for key in NEW_FIELDS} == NEW_FIELDS
        path = f"/v1/webhooks/{hook['id']}"
        throttled = create_webhook(
            client,
            receiver.url("/fields"),
            ["*"],
            enabled=False,
            description="CRM",
            max_deliveries_per_second=5,
        )
        assert throttled["max_deliveries_per_second"] == 5
        assert (
            ok(client.patch(path, json={"max_deliveries_per_second": 10000}))[
                "max_deliveries_per_second"
            ]
            == 10000
        )
        kept = ok(client.patch(path, json={"description": "x"}))
        assert kept["max_deliveries_per_second"] == 10000
        # A PATCH leaves what it does not name, description included.
        other = ok(client.patch(f"/v1/webhooks/{throttled['id']}", json={"enabled": True}))
        assert (other["description"], other["max_deliveries_per_second"]) == ("CRM", 5)
        assert ok(client.get(path))["max_deliveries_per_second"] == 10000
        cleared = ok(client.patch(path, json={"max_deliveries_per_second": None}))
        assert cleared["max_deliveries_per_second"] is None
        listed = ok(client.get("/v1/webhooks"))["data"]
        assert {item["id"]: item["max_deliveries_per_second"] for item in listed} == {
            hook["id"]: None,
            throttled["id"]: 5,
        }


@pytest.mark.parametrize("value", [0, 10001, -1, "5", 2.5, True, [5]])
def test_bad_throttles_are_refused_on_create_and_update(
    stack: Stack, receiver: Receiver, value: Any
) -> None:
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        body = {"url": receiver.url("/x"), "events": ["*"], "max_deliveries_per_second": value}
        created = client.post("/v1/webhooks", json=body)
        assert created.status_code == 400, created.text
        assert created.json()["error"]["param"] == "max_deliveries_per_second"
        hook = create_webhook(client, receiver.url("/x"), ["*"], enabled=False)
        patched = client.patch(
            f"/v1/webhooks/{hook['id']}", json={"max_deliveries_per_second": value}
        )
        assert patched.status_code == 400, patched.text
        assert patched.json()["error"]["param"] == "max_deliveries_per_second"
        assert ok(client.get(f"/v1/webhooks/{hook['id']}"))["max_deliveries_per_second"] is None
