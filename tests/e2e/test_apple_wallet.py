"""Live updates to Apple Wallet on the whole stack (issue 6, acceptance 1 and 3).

An emulated iPhone installs a pass by registering, receives the push the issuer sends the fake
APNs after a PATCH, asks which serials changed since its tag, downloads the new pass and finds
the new values in its pass.json; each step's event and webhook is recorded. A 410 from APNs
removes the registration; a failed push does not fail the PATCH and is counted in the event.
"""

import json
from collections.abc import Iterator

import pytest

from services.webhooks.mapping import webhook_type
from tests.support.api import list_page, ok
from tests.support.apple_wallet import PASS_TYPE, event_where, issue_and_download, pushes_to
from tests.support.emulated_iphone import EmulatedIPhone
from tests.support.fake_apns import FakeApns
from tests.support.polling import poll
from tests.support.receiver import Receiver
from tests.support.stack import Stack

pytestmark = pytest.mark.e2e


@pytest.fixture
def iphone() -> Iterator[EmulatedIPhone]:
    phone = EmulatedIPhone()
    try:
        yield phone
    finally:
        phone.close()


def test_an_installed_pass_follows_every_patch(
    stack: Stack, fake_apns: FakeApns, iphone: EmulatedIPhone
) -> None:
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        pass_, pkpass, last_modified = issue_and_download(client)
        serial = pass_["serial_number"]

        assert iphone.install(pkpass, last_modified) == 201
        installed = event_where(client, pass_["id"], "installed")
        assert installed["metadata"]["wallet"] == "apple"
        assert iphone.device_library_identifier not in json.dumps(installed)

        # First update: the phone has no tag yet, so it is told about every registered pass.
        ok(client.patch(f"/v1/passes/{pass_['id']}", json={"field_values": {"seat": "14B"}}))
        (push,) = pushes_to(fake_apns, iphone.push_token, 1)
        assert push.status == 200
        assert push.headers["apns-topic"] == PASS_TYPE
        assert push.body == b"{}"
        first = iphone.on_push(PASS_TYPE)
        assert (first.listing_status, first.serial_numbers) == (200, [serial])
        assert first.downloads == {serial: 200}
        seat = iphone.passes[serial].field("seat")
        assert seat == {
            "key": "seat",
            "label": "Seat",
            "value": "14B",
            "changeMessage": "Changed to %@",
        }
        pushed = event_where(client, pass_["id"], "updated", stage="pushed")
        assert pushed["metadata"]["devices_pushed"] == 1
        assert pushed["metadata"]["push_failures"] == 0
        assert pushed["metadata"]["field_values"] == ["seat"]
        delivered = event_where(client, pass_["id"], "updated", stage="delivered")
        assert delivered["metadata"]["version"] == 2
        assert delivered["metadata"]["serial_number"] == serial

        # Second update: now the phone asks with its tag, and the download is conditional.
        ok(client.patch(f"/v1/passes/{pass_['id']}", json={"field_values": {"seat": "15C"}}))
        pushes_to(fake_apns, iphone.push_token, 2)
        second = iphone.on_push(PASS_TYPE)
        assert (second.listing_status, second.serial_numbers) == (200, [serial])
        assert second.downloads == {serial: 200}
        assert iphone.passes[serial].field("seat") == {**seat, "value": "15C"}
        event_where(client, pass_["id"], "updated", stage="delivered", version=3)

        # Nothing changed since: 204 for the listing, and 304 for the pass once the clock has
        # passed the version's stamp. Until then Last-Modified is the response's Date, never
        # later (issue 15), and a device sending that back gets a spare 200.
        assert iphone.on_push(PASS_TYPE).listing_status == 204
        poll(lambda: iphone.fetch(serial) == 304, timeout=5.0, message="a 304 for the pass")

        # Every step is on the pass's record: issued, downloaded, installed, twice pushed and
        # delivered (versions 2 and 3, 3 once more for each spare download; a 304 records
        # nothing).
        events = poll(
            lambda: list_page(client, f"/v1/passes/{pass_['id']}/events")["data"],
            lambda found: len(found) >= 7,
        )
        steps = sorted({(event["type"], event["metadata"].get("stage", "")) for event in events})
        assert steps == [
            ("created", ""),
            ("downloaded", ""),
            ("installed", ""),
            ("updated", "delivered"),
            ("updated", "pushed"),
        ]
        kinds = [(event["type"], event["metadata"].get("stage")) for event in events]
        assert kinds.count(("updated", "pushed")) == 2
        versions = [
            e["metadata"]["version"] for e in events if e["metadata"].get("stage") == "delivered"
        ]
        assert set(versions) == {2, 3}
        assert len(events) == 5 + len(versions)


def test_voiding_pushes_and_the_device_gets_the_voided_pass(
    stack: Stack, fake_apns: FakeApns, iphone: EmulatedIPhone
) -> None:
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        pass_, pkpass, last_modified = issue_and_download(client)
        assert iphone.install(pkpass, last_modified) == 201
        ok(client.delete(f"/v1/passes/{pass_['id']}"))
        pushes_to(fake_apns, iphone.push_token, 1)
        sync = iphone.on_push(PASS_TYPE)
        assert sync.downloads == {pass_["serial_number"]: 200}
        assert iphone.passes[pass_["serial_number"]].pass_json["voided"] is True
        voided = event_where(client, pass_["id"], "voided")
        assert voided["metadata"]["devices_pushed"] == 1


def test_a_410_removes_the_registration(
    stack: Stack, fake_apns: FakeApns, iphone: EmulatedIPhone
) -> None:
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        pass_, pkpass, last_modified = issue_and_download(client)
        assert iphone.install(pkpass, last_modified) == 201
        fake_apns.answer(iphone.push_token, 410, "Unregistered")
        ok(client.patch(f"/v1/passes/{pass_['id']}", json={"field_values": {"seat": "1"}}))
        removed = event_where(client, pass_["id"], "removed", reason="push_token_inactive")
        assert removed["metadata"]["wallet"] == "apple"
        pushed = event_where(client, pass_["id"], "updated", stage="pushed")
        assert pushed["metadata"]["devices_pushed"] == 0
        assert pushed["metadata"]["push_failures"] == 1
        assert pushed["metadata"]["devices_unregistered"] == 1
        # The device is no longer registered: nothing is listed, and no push is sent any more.
        assert iphone.on_push(PASS_TYPE).listing_status == 204
        ok(client.patch(f"/v1/passes/{pass_['id']}", json={"field_values": {"seat": "2"}}))
        event_where(
            client, pass_["id"], "updated", stage="pushed", devices_pushed=0, push_failures=0
        )
        assert len(fake_apns.pushes(iphone.push_token)) == 1


def test_a_failed_push_does_not_fail_the_patch_and_is_counted(
    stack: Stack, fake_apns: FakeApns
) -> None:
    account = stack.new_account()
    reachable, failing = EmulatedIPhone(), EmulatedIPhone()
    try:
        with stack.client(headers=account.headers()) as client:
            pass_, pkpass, last_modified = issue_and_download(client)
            assert reachable.install(pkpass, last_modified) == 201
            assert failing.install(pkpass, last_modified) == 201
            fake_apns.answer(failing.push_token, 500, "InternalServerError")
            response = client.patch(
                f"/v1/passes/{pass_['id']}", json={"field_values": {"seat": "9"}}
            )
            assert ok(response)["field_values"]["seat"] == "9"
            pushed = event_where(client, pass_["id"], "updated", stage="pushed")
            assert pushed["metadata"]["devices_pushed"] == 1
            assert pushed["metadata"]["push_failures"] == 1
            assert pushed["metadata"]["devices_unregistered"] == 0
            # A failure other than 410 keeps the registration: the next update tries again.
            assert failing.on_push(PASS_TYPE).serial_numbers == [pass_["serial_number"]]
    finally:
        reachable.close()
        failing.close()


@pytest.mark.skipif(
    webhook_type("updated", {"stage": "delivered"}) != "pass.update_delivered",
    reason="services/webhooks/mapping.py does not map updated with stage delivered to "
    "pass.update_delivered yet (the webhooks service's part of issue 6)",
)
def test_each_step_fires_its_webhook(
    stack: Stack, fake_apns: FakeApns, iphone: EmulatedIPhone, receiver: Receiver
) -> None:
    account = stack.new_account()
    wanted = ["pass.added_to_wallet", "pass.update_pushed", "pass.update_delivered"]
    with stack.client(headers=account.headers()) as client:
        ok(client.post("/v1/webhooks", json={"url": receiver.url("/apple"), "events": wanted}))
        pass_, pkpass, last_modified = issue_and_download(client)
        assert iphone.install(pkpass, last_modified) == 201
        ok(client.patch(f"/v1/passes/{pass_['id']}", json={"field_values": {"seat": "2"}}))
        pushes_to(fake_apns, iphone.push_token, 1)
        assert iphone.on_push(PASS_TYPE).downloads == {pass_["serial_number"]: 200}
    arrived = poll(
        lambda: sorted(json.loads(r.body)["type"] for r in receiver.requests("/apple")),
        lambda types: len(types) >= len(wanted),
        timeout=30.0,
    )
    assert arrived == sorted(wanted)
