"""The last redemption marks the wallet copy used (issue 13, acceptance 5; docs/redemption.md):
the .pkpass is rebuilt with `voided: true` and still verifies with openssl, a registered device
is pushed and fetches the new version, and the Google object turns COMPLETED; the pass object's
own `voided` stays false. `on_limit: "keep"` leaves the wallet copy as it was. The stack with
live credentials also shows that a test key never redeems a live pass (`wrong_mode`)."""

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tests.issuer.google import walletschema
from tests.support.api import create_pass, create_template, event_types, list_page, ok
from tests.support.apple_wallet import PASS_TYPE, event_where, pushes_to
from tests.support.emulated_iphone import EmulatedIPhone
from tests.support.fake_apns import FakeApns
from tests.support.fake_google import FakeGoogle, running_fake_google
from tests.support.live_credentials import live_credentials
from tests.support.pkpass_check import verified_pass_json
from tests.support.polling import poll
from tests.support.stack import Stack, new_stack, serving

pytestmark = pytest.mark.e2e
ISSUER_ID = "3388000000087654321"


@pytest.fixture
def iphone() -> Iterator[EmulatedIPhone]:
    phone = EmulatedIPhone()
    try:
        yield phone
    finally:
        phone.close()


def _scan(client: httpx2.Client, pass_id: str) -> dict[str, Any]:
    return ok(client.post("/v1/scans", json={"pass_id": pass_id}))


def test_the_last_redemption_voids_the_wallet_copy_and_pushes_it(
    stack: Stack, fake_apns: FakeApns, iphone: EmulatedIPhone, tmp_path: Path
) -> None:
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        template = create_template(client, redemption={"max_redemptions": 2})
        pass_ = create_pass(client, template["id"], field_values={"seat": "12A"})
        download = httpx2.get(pass_["download_url"], timeout=30.0)
        serial = pass_["serial_number"]
        assert iphone.install(download.content, download.headers.get("last-modified")) == 201
        assert "voided" not in iphone.passes[serial].pass_json

        first = _scan(client, pass_["id"])
        assert (first["result"], first["redemptions_remaining"]) == ("accepted", 1)
        last = _scan(client, pass_["id"])
        assert (last["result"], last["redemptions_remaining"]) == ("accepted", 0)

        (push,) = pushes_to(fake_apns, iphone.push_token, 1)
        assert push.status == 200
        sync = iphone.on_push(PASS_TYPE)
        assert (sync.serial_numbers, sync.downloads) == ([serial], {serial: 200})
        assert iphone.passes[serial].pass_json["voided"] is True
        pushed = event_where(client, pass_["id"], "updated", stage="pushed", reason="redeemed")
        assert pushed["metadata"]["devices_pushed"] == 1
        assert pushed["metadata"]["scan_id"] == last["id"]
        event_where(client, pass_["id"], "updated", stage="delivered", version=2)

        downloaded = client.get(pass_["download_url"])
        pass_json = verified_pass_json(
            downloaded.content, stack.signing_dir / "root-ca.pem", tmp_path / "used"
        )
        assert pass_json["voided"] is True
        assert pass_json["serialNumber"] == serial
        # Used, not voided by the issuer: the pass object says so, and a third scan is
        # rejected as already redeemed, not as voided.
        got = ok(client.get(f"/v1/passes/{pass_['id']}"))
        assert (got["voided"], got["voided_at"], got["redemption_count"]) == (False, None, 2)
        assert _scan(client, pass_["id"])["reason"] == "already_redeemed"
        types = poll(
            lambda: event_types(client, pass_["id"]),
            lambda found: found.count("redeemed") == 2,
        )
        assert "voided" not in types


def test_a_lowered_limit_marks_the_passes_redeemed_that_often_used_and_pushes_them(
    stack: Stack, fake_apns: FakeApns, iphone: EmulatedIPhone, tmp_path: Path
) -> None:
    """max_redemptions 3 lowered to 2: the pass redeemed twice is rebuilt as used by a job and
    its device pushed and synced, as if its last scan had done it; the passes redeemed less
    are not touched, and raising the limit again marks nothing."""
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        template = create_template(client, redemption={"max_redemptions": 3})
        twice, once = (create_pass(client, template["id"]) for _ in range(2))
        download = httpx2.get(twice["download_url"], timeout=30.0)
        serial = twice["serial_number"]
        assert iphone.install(download.content, download.headers.get("last-modified")) == 201
        for pass_id in (twice["id"], twice["id"], once["id"]):
            assert _scan(client, pass_id)["result"] == "accepted"
        assert fake_apns.pushes(iphone.push_token) == []  # one redemption left: not used yet

        lowered = {"redemption": {"max_redemptions": 2}}
        ok(client.patch(f"/v1/templates/{template['id']}", json=lowered))

        jobs = poll(
            lambda: list_page(client, f"/v1/jobs?template_id={template['id']}&type=update_passes")[
                "data"
            ],
            lambda found: bool(found) and found[0]["status"] == "succeeded",
        )
        assert [(job["total"], job["succeeded"], job["failed"]) for job in jobs] == [(1, 1, 0)]
        (push,) = pushes_to(fake_apns, iphone.push_token, 1)
        assert push.status == 200
        sync = iphone.on_push(PASS_TYPE)
        assert (sync.serial_numbers, sync.downloads) == ([serial], {serial: 200})
        assert iphone.passes[serial].pass_json["voided"] is True
        pushed = event_where(
            client, twice["id"], "updated", stage="pushed", reason="redemption_limit"
        )
        assert pushed["metadata"]["job_id"] == jobs[0]["id"]
        used = verified_pass_json(
            client.get(twice["download_url"]).content,
            stack.signing_dir / "root-ca.pem",
            tmp_path / "used",
        )
        assert used["voided"] is True
        assert _scan(client, twice["id"])["reason"] == "already_redeemed"

        kept = verified_pass_json(
            client.get(once["download_url"]).content,
            stack.signing_dir / "root-ca.pem",
            tmp_path / "kept",
        )
        assert "voided" not in kept
        assert "updated" not in event_types(client, once["id"])
        raised = {"redemption": {"max_redemptions": 5}}
        ok(client.patch(f"/v1/templates/{template['id']}", json=raised))
        assert len(list_page(client, f"/v1/jobs?template_id={template['id']}")["data"]) == 1


def test_keep_leaves_the_wallet_copy_as_it_was(
    stack: Stack, fake_apns: FakeApns, iphone: EmulatedIPhone, tmp_path: Path
) -> None:
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        template = create_template(client, redemption={"on_limit": "keep"})
        pass_ = create_pass(client, template["id"])
        assert _scan(client, pass_["id"])["result"] == "accepted"
        poll(lambda: "redeemed" in event_types(client, pass_["id"]))
        downloaded = client.get(pass_["download_url"])
        pass_json = verified_pass_json(
            downloaded.content, stack.signing_dir / "root-ca.pem", tmp_path / "kept"
        )
        assert "voided" not in pass_json
        assert "updated" not in event_types(client, pass_["id"])


# --- Google: a stack with a service account whose calls go to a fake of Google's API ----------


@pytest.fixture(scope="module")
def fake_google() -> Iterator[FakeGoogle]:
    with running_fake_google(validate=walletschema.errors) as fake:
        yield fake


@pytest.fixture(scope="module")
def google_stack(
    nats_url: str,
    mongo_url: str,
    fake_google: FakeGoogle,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Stack]:
    running = new_stack(nats_url, mongo_url, tmp_path_factory.mktemp("google-stack"))
    running.extra_env = live_credentials(
        running.work_dir, fake_google, issuer_id=ISSUER_ID, pass_type="pass.com.example.scan"
    )
    with serving(running):
        yield running


def test_the_google_object_of_a_used_pass_is_completed(
    google_stack: Stack, fake_google: FakeGoogle, tmp_path: Path
) -> None:
    account = google_stack.new_account("paid")
    with google_stack.client(headers=account.headers("live")) as live:
        template = create_template(live)
        issued = create_pass(live, template["id"])
        assert fake_google.object_of(issued["id"])["state"] == "ACTIVE"
        headers = {"Idempotency-Key": str(uuid.uuid4())}
        answer = ok(live.post("/v1/scans", json={"pass_id": issued["id"]}, headers=headers))
        assert answer["result"] == "accepted"
        fake_google.object_of(issued["id"], lambda stored: stored["state"] == "COMPLETED")
        downloaded = live.get(issued["download_url"])
        pass_json = verified_pass_json(
            downloaded.content, google_stack.work_dir / "apple" / "root-ca.pem", tmp_path / "g"
        )
        assert pass_json["voided"] is True
        assert ok(live.get(f"/v1/passes/{issued['id']}"))["voided"] is False


def test_a_test_key_never_redeems_a_live_pass(google_stack: Stack) -> None:
    """On this stack live passes can be issued (issue 13 section 2: `wrong_mode`)."""
    account = google_stack.new_account("paid")
    with (
        google_stack.client(headers=account.headers("test")) as test,
        google_stack.client(headers=account.headers("live")) as live,
    ):
        live_pass = create_pass(live, create_template(live)["id"])
        for body in ({"code": live_pass["serial_number"]}, {"pass_id": live_pass["id"]}):
            answer = ok(test.post("/v1/scans", json=body))
            assert (answer["result"], answer["reason"], answer["pass"]) == (
                "rejected",
                "wrong_mode",
                None,
            )
        assert ok(live.get(f"/v1/passes/{live_pass['id']}"))["redemption_count"] == 0
        # The live key scans it.
        assert ok(live.post("/v1/scans", json={"pass_id": live_pass["id"]}))["result"] == "accepted"
