"""Live mode on a stack with "production" credentials: an Apple identity loaded from files and a
Google service account whose REST calls go to a local fake of Google's API (real HTTP).

This exercises the paths a real deployment takes: configured signing for both modes, class and
object upserts through the Wallet REST API, skinny save links, and INACTIVE on voiding.
"""

import base64
import io
import json
import subprocess
import zipfile
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from pymongo import MongoClient
from pymongo.synchronous.collection import Collection

from tests.issuer.google import walletschema
from tests.support.api import (
    assert_error,
    create_pass,
    create_template,
    ids,
    list_page,
    ok,
    wait_for_events,
)
from tests.support.apple_wallet import pushes_to
from tests.support.emulated_iphone import EmulatedIPhone
from tests.support.fake_apns import FakeApns, running_fake_apns
from tests.support.fake_google import FakeGoogle, running_fake_google
from tests.support.live_credentials import LIVE_PASS_TYPE, live_credentials
from tests.support.polling import poll
from tests.support.stack import Stack, new_stack, serving

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def fake_google() -> Iterator[FakeGoogle]:
    with running_fake_google(validate=walletschema.errors) as fake:
        yield fake


@pytest.fixture(scope="module")
def live_stack(
    nats_url: str,
    mongo_url: str,
    fake_google: FakeGoogle,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Stack, FakeApns]]:
    """Configured credentials, and pushes to a fake APNs that trusts the Apple identity."""
    running = new_stack(nats_url, mongo_url, tmp_path_factory.mktemp("live-stack"))
    credentials = live_credentials(running.work_dir, fake_google)
    with running_fake_apns(running.work_dir / "apple" / "root-ca.pem", running.work_dir) as apns:
        running.extra_env = credentials | {
            "TESSERA_EVENTS_APNS_URL": apns.url,
            "TESSERA_EVENTS_APNS_CA_PATH": str(apns.server_ca_path),
        }
        with serving(running):
            yield running, apns


@pytest.fixture(scope="module")
def stack(live_stack: tuple[Stack, FakeApns]) -> Stack:
    """Overrides the development stack of conftest.py with configured credentials."""
    return live_stack[0]


@pytest.fixture
def iphone() -> Iterator[EmulatedIPhone]:
    phone = EmulatedIPhone()
    try:
        yield phone
    finally:
        phone.close()


def test_a_live_pass_is_signed_and_synced_to_google(stack: Stack, fake_google: FakeGoogle) -> None:
    account = stack.new_account("paid")
    with stack.client(headers=account.headers("live")) as live:
        template = create_template(live)
        issued = create_pass(live, template["id"])
        assert issued["mode"] == "live"
        pkpass = live.get(issued["download_url"])
    archive = zipfile.ZipFile(io.BytesIO(pkpass.content))
    pass_json = json.loads(archive.read("pass.json"))
    assert pass_json["passTypeIdentifier"] == "pass.com.example.live"
    folder = stack.work_dir / f"unzipped-{issued['id']}"
    archive.extractall(folder)
    verified = subprocess.run(
        ["/usr/bin/openssl", "cms", "-verify", "-binary", "-inform", "DER",
         "-in", str(folder / "signature"), "-content", str(folder / "manifest.json"),
         "-CAfile", str(stack.work_dir / "apple" / "root-ca.pem"), "-purpose", "any",
         "-out", "/dev/null"],
        capture_output=True, check=False,
    )  # fmt: skip
    assert verified.returncode == 0, verified.stderr
    # With real credentials the class and object live at Google, upserted by the Google step.
    stored = fake_google.object_of(issued["id"])
    assert stored["state"] == "ACTIVE"
    assert stored["classId"] in fake_google.classes
    with stack.client(headers=account.headers("live")) as live:
        poll(lambda: ok(live.get(f"/v1/passes/{issued['id']}")), _synced, message="synced")


def test_patch_and_void_reach_google(stack: Stack, fake_google: FakeGoogle) -> None:
    account = stack.new_account("paid")
    with stack.client(headers=account.headers("live")) as live:
        template = create_template(live)
        issued = create_pass(live, template["id"])
        fake_google.object_of(issued["id"])
        ok(live.patch(f"/v1/passes/{issued['id']}", json={"field_values": {"seat": "Z99"}}))
        fake_google.object_of(issued["id"], lambda stored: "Z99" in json.dumps(stored))
        ok(live.delete(f"/v1/passes/{issued['id']}"))
    fake_google.object_of(issued["id"], lambda stored: stored["state"] == "INACTIVE")


def test_a_google_outage_fails_and_delays_nothing_on_apple_and_heals(
    live_stack: tuple[Stack, FakeApns], fake_google: FakeGoogle, iphone: EmulatedIPhone
) -> None:
    """Issue 15: Google is a separate, retried step; Apple issuance, updates and pushes never
    wait on it, the pass and the metrics show its status, and it catches up."""
    stack, apns = live_stack
    account = stack.new_account("paid")
    with stack.client(headers=account.headers("live")) as live:
        template = create_template(live)
        fake_google.outage_status = 500
        try:
            issued = create_pass(live, template["id"])
            download = live.get(issued["download_url"])
            assert download.status_code == 200
            serial = issued["serial_number"]
            assert iphone.install(download.content, download.headers.get("last-modified")) == 201
            body = {"field_values": {"seat": "A1"}}
            ok(live.patch(f"/v1/passes/{issued['id']}", json=body))
            # The installed pass is pushed and fetched while Google still fails.
            (push,) = pushes_to(apns, iphone.push_token, 1)
            assert push.status == 200
            sync = iphone.on_push(LIVE_PASS_TYPE)
            assert sync.downloads == {serial: 200}
            assert (iphone.passes[serial].field("seat") or {}).get("value") == "A1"
            failing = poll(
                lambda: ok(live.get(f"/v1/passes/{issued['id']}")),
                lambda found: found["google_status"] == "failing",
                message="the Google step to fail",
            )
            assert failing["field_values"] == {"seat": "A1"}
            # Any replica may have made the attempts: every one's metrics are read.
            metrics = "".join(
                httpx2.get(f"http://{stack.host}:{member.port(stack.api_port)}/metrics").text
                for member in stack.members("issuer")
            )
            assert 'tessera_google_syncs_total{outcome="failed"}' in metrics
            assert not [key for key in fake_google.objects if issued["id"].split("_")[1] in key]
        finally:
            fake_google.outage_status = None
        # Google answers again: the object is created, current, at the next retry.
        stored = fake_google.object_of(issued["id"], lambda found: "A1" in json.dumps(found))
        assert stored["state"] == "ACTIVE"
        poll(
            lambda: ok(live.get(f"/v1/passes/{issued['id']}")),
            _synced,
            message="the pass to show the Google object synced",
        )


def _synced(found: dict[str, Any]) -> bool:
    return bool(found["google_status"] == "synced")


def test_variant_a_google_link_is_skinny_with_real_credentials(
    stack: Stack, fake_google: FakeGoogle
) -> None:
    account = stack.new_account("paid")
    with stack.client(headers=account.headers("live")) as live:
        template = create_template(live)
    response = httpx2.post(
        f"{stack.base_url}/passes",
        json={"templateId": template["id"], "data": {}},
        headers={"x-api-key": account.live_key},
    )
    assert response.status_code == 201, response.text
    mongo: MongoClient[dict[str, Any]]
    with MongoClient(stack.mongo_url) as mongo:
        passes: Collection[dict[str, Any]] = mongo[stack.database]["passes"]
        # Skinny once the Google step has put the object at Google (fat before: ids alone
        # would open Google's error page; tests/issuer/google/test_passes.py).
        poll(
            lambda: passes.count_documents({"account_id": account.id, "google_status": "synced"}),
            message="the object synced",
        )
    saved = httpx2.head(response.json()["google"])  # Tessera's redirect, signing the link
    assert saved.status_code == 302
    token = saved.headers["location"].rsplit("/", 1)[1]
    claims: dict[str, Any] = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))
    (objects,) = claims["payload"].values()
    assert set(objects[0]) <= {"id", "classId"}
    assert objects[0]["id"] in fake_google.objects


def test_test_and_live_objects_are_separate(stack: Stack) -> None:
    account = stack.new_account("paid")
    with (
        stack.client(headers=account.headers("test")) as test,
        stack.client(headers=account.headers("live")) as live,
    ):
        t_tmpl = create_template(test, name="test tmpl")
        l_tmpl = create_template(live, name="live tmpl")
        t_pass = create_pass(test, t_tmpl["id"])
        l_pass = create_pass(live, l_tmpl["id"])
        assert t_pass["mode"] == "test"
        assert l_pass["mode"] == "live"

        assert ids(list_page(test, "/v1/templates")) == [t_tmpl["id"]]
        assert ids(list_page(live, "/v1/templates")) == [l_tmpl["id"]]
        assert ids(list_page(test, "/v1/passes")) == [t_pass["id"]]
        assert ids(list_page(live, "/v1/passes")) == [l_pass["id"]]
        assert list_page(live, "/v1/passes", template_id=t_tmpl["id"])["data"] == []

        for client, tmpl, pass_ in ((live, t_tmpl, t_pass), (test, l_tmpl, l_pass)):
            assert_error(client.get(f"/v1/templates/{tmpl['id']}"), 404, "not_found_error")
            assert_error(
                client.patch(f"/v1/templates/{tmpl['id']}", json={"name": "x"}),
                404,
                "not_found_error",
            )
            assert_error(client.delete(f"/v1/templates/{tmpl['id']}"), 404, "not_found_error")
            assert_error(
                client.post("/v1/passes", json={"template_id": tmpl["id"]}), 404, "not_found_error"
            )
            assert_error(client.get(f"/v1/passes/{pass_['id']}"), 404, "not_found_error")
            assert_error(
                client.patch(f"/v1/passes/{pass_['id']}", json={"metadata": {"a": 1}}),
                404,
                "not_found_error",
            )
            assert_error(client.delete(f"/v1/passes/{pass_['id']}"), 404, "not_found_error")
            assert_error(client.get(f"/v1/passes/{pass_['id']}/events"), 404, "not_found_error")

        # Events too: each mode sees only its own.
        def created_ids(client: httpx2.Client) -> list[str]:
            return [e["pass_id"] for e in list_page(client, "/v1/events")["data"]]

        wait_for_events(test, t_pass["id"], ["created"])
        wait_for_events(live, l_pass["id"], ["created"])
        assert created_ids(test) == [t_pass["id"]]
        assert created_ids(live) == [l_pass["id"]]
        # Nothing was changed by the refused cross-mode writes.
        assert ok(test.get(f"/v1/templates/{t_tmpl['id']}")) == t_tmpl
        # (but the Google step: "pending" when created, "synced" since)
        unchanged = ok(live.get(f"/v1/passes/{l_pass['id']}"))
        assert {**unchanged, "google_status": None} == {**l_pass, "google_status": None}


def test_a_stopping_issuer_finishes_its_google_calls_in_flight(
    stack: Stack, fake_google: FakeGoogle
) -> None:
    """On SIGTERM the Google step gets its grace to finish (docs/operations.md#stopping); the
    issuer closed its Google client before stopping the step, so the call in flight and the
    next failed ("the client has been closed") and the pass waited out a lease (60 s)."""
    account = stack.new_account("paid")
    issuers = stack.replica_names("issuer")
    with stack.client(headers=account.headers("live")) as live:
        template = create_template(live)
        fake_google.delay_seconds = 1.0  # each call: long enough to stop the issuer mid-call
        try:
            issued = create_pass(live, template["id"])
            suffix = issued["id"].split("_", 1)[1]
            poll(
                lambda: [path for _, path in fake_google.requests if suffix in path],
                message="the pass's Google call under way",
                interval=0.01,
            )
            for name in issuers:
                stack.children[name].terminate()
            for name in issuers:
                assert stack.children[name].wait(30.0)
            # Stopped: what it had under way reached Google in its grace.
            assert [key for key in fake_google.objects if suffix in key]
        finally:
            fake_google.delay_seconds = 0.0
            stack.start("issuer")
    assert "client has been closed" not in stack.log_text("issuer")
