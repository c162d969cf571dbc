"""Issue 15, acceptance 6 (the bundle part): pass bundles on the whole stack.

A bundle made from pass ids or from a batch; its .pkpasses is a zip of one .pkpass per pass,
each the bytes of the pass's own download, verified with openssl and loaded by passkit-generator
(an independent implementation); refusals name their param and never tell another account's
pass from a missing one; replays under an Idempotency-Key answer the same bundle; the landing
page shows every pass; downloads and views record one event per pass with the bundle's id.
"""

import io
import json
import re
import zipfile
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tests.node import harness
from tests.support.api import TEMPLATE_BODY, assert_error, create_pass, create_template, ok
from tests.support.pkpass_check import verified_pass_json
from tests.support.polling import poll
from tests.support.stack import Account, Stack
from tests.support.user_agents import ANDROID, DESKTOP, GOOGLEBOT, IPHONE

pytestmark = pytest.mark.e2e
BUNDLE_KEYS = {"id", "object", "pass_ids", "url", "download_url", "created_at"}


def _passes(stack: Stack, account: Account, count: int, **template: Any) -> list[dict[str, Any]]:
    with stack.client(headers=account.headers()) as client:
        made = create_template(client, TEMPLATE_BODY, **template)
        return [
            create_pass(client, made["id"], field_values={"seat": f"A{n}"}) for n in range(count)
        ]


def _bundle(stack: Stack, account: Account, pass_ids: list[str]) -> dict[str, Any]:
    with stack.client(headers=account.headers()) as client:
        return ok(client.post("/v1/pass_bundles", json={"pass_ids": pass_ids}))


def _get(url: str, user_agent: str = IPHONE, method: str = "GET") -> httpx2.Response:
    return httpx2.request(method, url, headers={"User-Agent": user_agent}, timeout=30.0)


def _entries(pkpasses: bytes) -> list[tuple[str, bytes]]:
    with zipfile.ZipFile(io.BytesIO(pkpasses)) as archive:
        return [(info.filename, archive.read(info)) for info in archive.infolist()]


def _serial(pkpass: bytes) -> str:
    with zipfile.ZipFile(io.BytesIO(pkpass)) as archive:
        serial: str = json.loads(archive.read("pass.json"))["serialNumber"]
    return serial


def _events(stack: Stack, account: Account, pass_id: str, event_type: str) -> list[Any]:
    with stack.client(headers=account.headers()) as client:
        page = ok(client.get(f"/v1/passes/{pass_id}/events"))
    return [event for event in page["data"] if event["type"] == event_type]


def _wait_events(
    stack: Stack, account: Account, pass_id: str, event_type: str, count: int
) -> list[Any]:
    return poll(
        lambda: _events(stack, account, pass_id, event_type),
        lambda found: len(found) >= count,
        message=f"{count} {event_type} of {pass_id}",
    )


def test_a_3_pass_bundle_is_a_pkpasses_of_3_verified_passes(stack: Stack, tmp_path: Path) -> None:
    account = stack.new_account()
    passes = _passes(stack, account, 3)
    pass_ids = [made["id"] for made in passes]

    bundle = _bundle(stack, account, pass_ids)

    assert set(bundle) == BUNDLE_KEYS
    assert bundle["object"] == "pass_bundle"
    assert bundle["id"].startswith("pbdl_")
    assert bundle["pass_ids"] == pass_ids
    assert bundle["url"] == f"{stack.base_url}/b/{bundle['id']}"
    assert bundle["download_url"] == f"{bundle['url']}.pkpasses"
    with stack.client(headers=account.headers()) as client:
        assert ok(client.get(f"/v1/pass_bundles/{bundle['id']}")) == bundle

    download = _get(bundle["download_url"])
    assert download.status_code == 200
    assert download.headers["content-type"] == "application/vnd.apple.pkpasses"
    assert download.headers["content-disposition"] == 'attachment; filename="acme-live.pkpasses"'
    assert download.headers["cache-control"] == "no-store"
    assert download.headers["referrer-policy"] == "no-referrer"
    assert download.headers["x-content-type-options"] == "nosniff"
    entries = _entries(download.content)
    assert [name for name, _ in entries] == ["pass-1.pkpass", "pass-2.pkpass", "pass-3.pkpass"]
    root_ca = stack.signing_dir / "root-ca.pem"
    for n, ((name, pkpass), made) in enumerate(zip(entries, passes, strict=True)):
        pass_json = verified_pass_json(pkpass, root_ca, tmp_path / name)
        assert pass_json["serialNumber"] == made["serial_number"]
        assert pass_json["eventTicket"]["primaryFields"][0]["value"] == f"A{n}"

    # One `downloaded` per pass, with the bundle; then each entry is that pass's own download.
    for made in passes:
        [event] = _wait_events(stack, account, made["id"], "downloaded", 1)
        assert event["metadata"] == {"wallet": "apple", "bundle_id": bundle["id"]}
    for (_, pkpass), made in zip(entries, passes, strict=True):
        assert _get(made["download_url"]).content == pkpass


def test_passkit_generator_loads_every_pass_of_the_bundle(stack: Stack, tmp_path: Path) -> None:
    reason = harness.missing_tools()
    if reason is not None:
        pytest.skip(f"passkit-generator check needs Node: {reason}")
    harness.ensure_installed()
    account = stack.new_account()
    bundle = _bundle(stack, account, [made["id"] for made in _passes(stack, account, 3)])

    entries = _entries(_get(bundle["download_url"]).content)

    assert len(entries) == 3
    signing = harness.signing_args(stack.signing_dir)
    for name, pkpass in entries:
        model = harness.write_model(pkpass, tmp_path, name.removesuffix(".pkpass"))
        report = harness.run_script("load_pass.mjs", str(model), *signing)
        assert report["errors"] == [], name
        assert report["warnings"] == [], name
        assert "eventTicket" in report["props"]


def test_a_batch_with_bundle_bundles_the_rows_it_made_and_a_replay_makes_nothing(
    stack: Stack,
) -> None:
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        template = create_template(client, TEMPLATE_BODY)
        rows = [
            {"template_id": template["id"], "field_values": {"seat": "B1"}},
            {"template_id": template["id"], "field_values": {"shoe": "9"}},  # refused
            {"template_id": template["id"], "field_values": {"seat": "B2"}},
        ]
        body = {"passes": rows, "bundle": True}
        key = {"Idempotency-Key": "batch-bundle-1"}

        first = ok(client.post("/v1/passes/batch", json=body, headers=key))
        replay = client.post("/v1/passes/batch", json=body, headers=key)
        plain = ok(client.post("/v1/passes/batch", json={"passes": rows[:1]}))
        total = len(ok(client.get("/v1/passes"))["data"])

    made = [row["pass"]["id"] for row in first["data"] if row["status"] == 201]
    assert len(made) == 2
    assert [row["status"] for row in first["data"]] == [201, 400, 201]
    bundle = first["bundle"]
    assert set(bundle) == BUNDLE_KEYS
    assert bundle["pass_ids"] == made
    assert replay.headers["idempotent-replayed"] == "true"
    assert replay.json() == first
    assert total == 3  # two from the batch, not four, and one plain
    assert plain["bundle"] is None
    entries = _entries(_get(bundle["download_url"]).content)
    assert [name for name, _ in entries] == ["pass-1.pkpass", "pass-2.pkpass"]


def test_bad_bundles_are_refused_with_their_param(stack: Stack) -> None:
    account = stack.new_account()
    passes = _passes(stack, account, 2)
    ids = [made["id"] for made in passes]
    [theirs] = _passes(stack, stack.new_account(), 1)
    unknown = "pass_0000000000000000000000"
    with stack.client(headers=account.headers()) as client:
        assert client.delete(f"/v1/passes/{ids[1]}").status_code == 200
        template_id = passes[0]["template_id"]

        def refused(body: Any) -> httpx2.Response:
            return client.post("/v1/pass_bundles", json=body)

        assert_error(refused({"pass_ids": [ids[0]] * 11}), 400, "invalid_request_error", "pass_ids")
        assert_error(refused({"pass_ids": []}), 400, "invalid_request_error", "pass_ids")
        assert_error(refused({}), 400, "invalid_request_error", "pass_ids", "parameter_missing")
        assert_error(refused({"pass_ids": [ids[0], 5]}), 400, "invalid_request_error", "pass_ids.1")
        assert_error(refused({"pass_ids": ids[:1], "x": 1}), 400, "invalid_request_error", "x")
        assert_error(
            refused({"pass_ids": [ids[0], ids[0]]}), 400, "invalid_request_error", "pass_ids.1"
        )
        assert_error(refused({"pass_ids": [ids[1]]}), 400, "invalid_request_error", "pass_ids.0")
        wrong_prefix = assert_error(
            refused({"pass_ids": [template_id]}), 404, "not_found_error", "pass_ids.0"
        )
        assert wrong_prefix["code"] == "resource_missing"
        # Another account's pass is answered exactly like one that does not exist.
        missing = assert_error(refused({"pass_ids": [ids[0], unknown]}), 404, "not_found_error")
        other = assert_error(refused({"pass_ids": [ids[0], theirs["id"]]}), 404, "not_found_error")
        assert missing["param"] == other["param"] == "pass_ids.1"
        assert missing["message"].replace(unknown, "<id>") == other["message"].replace(
            theirs["id"], "<id>"
        )
        too_many = [{"template_id": template_id}] * 11
        batch = client.post("/v1/passes/batch", json={"passes": too_many, "bundle": True})
        assert_error(batch, 400, "invalid_request_error", "bundle")
        not_bool = client.post("/v1/passes/batch", json={"passes": too_many[:1], "bundle": "yes"})
        assert_error(not_bool, 400, "invalid_request_error", "bundle")
        assert len(ok(client.get("/v1/passes"))["data"]) == 2  # nothing made by the refusals
        bundle = ok(client.post("/v1/pass_bundles", json={"pass_ids": ids[:1]}))
    # A bundle is the account's and mode's: another account's key cannot read it.
    with stack.client(headers=stack.new_account().headers()) as client:
        assert_error(client.get(f"/v1/pass_bundles/{bundle['id']}"), 404, "not_found_error")
        assert_error(client.get("/v1/pass_bundles/pass_x"), 404, "not_found_error")
    # Client mistakes are answered, not logged as failures.
    assert "Traceback" not in stack.log_text("api") + stack.log_text("issuer")


def test_a_replay_answers_the_same_bundle(stack: Stack) -> None:
    account = stack.new_account()
    ids = [made["id"] for made in _passes(stack, account, 2)]
    key = {"Idempotency-Key": "bundle-1"}
    with stack.client(headers=account.headers()) as client:
        first = client.post("/v1/pass_bundles", json={"pass_ids": ids}, headers=key)
        again = client.post("/v1/pass_bundles", json={"pass_ids": ids}, headers=key)
        other = client.post("/v1/pass_bundles", json={"pass_ids": ids[:1]}, headers=key)
        fresh = ok(client.post("/v1/pass_bundles", json={"pass_ids": ids}))

    assert again.headers["idempotent-replayed"] == "true"
    assert again.json() == ok(first)
    assert_error(other, 409, "idempotency_error", code="idempotency_key_reused")
    assert fresh["id"] != ok(first)["id"]  # without a key, a second bundle


def test_the_landing_page_shows_every_pass_and_records_a_view_of_each(stack: Stack) -> None:
    account = stack.new_account()
    passes = _passes(stack, account, 3)
    bundle = _bundle(stack, account, [made["id"] for made in passes])

    desktop = _get(bundle["url"], DESKTOP)
    assert _get(bundle["url"], IPHONE, method="HEAD").status_code == 200
    assert _get(bundle["url"], GOOGLEBOT).status_code == 200

    assert desktop.status_code == 200
    assert desktop.headers["content-type"].startswith("text/html")
    assert desktop.headers["cache-control"] == "no-store"
    assert desktop.headers["referrer-policy"] == "no-referrer"
    csp = desktop.headers["content-security-policy"]
    assert "default-src 'none'" in csp
    assert "frame-ancestors 'none'" in csp
    assert len(re.findall(r"'sha256-", csp)) == 1  # the one inline <style>, every pass's colors
    html = desktop.text
    assert html.count('class="pass"') == 3
    assert "Your 3 passes" in html
    assert f'href="{bundle["download_url"]}"' in html
    assert "Add all to Apple Wallet" in html
    assert re.findall(r'data-qr-content="([^"]+)"', html) == [bundle["url"]]
    for n, made in enumerate(passes):
        assert f">A{n}<" in html
        assert f'href="{made["download_url"]}"' in html
        assert f'href="{made["url"]}/google"' in html
    android = _get(bundle["url"], ANDROID).text
    assert "Add all to Apple Wallet" not in android
    for made in passes:
        viewed = _wait_events(stack, account, made["id"], "url_viewed", 2)
        assert sorted(event["metadata"]["platform"] for event in viewed) == ["android", "desktop"]
        assert {event["metadata"]["bundle_id"] for event in viewed} == {bundle["id"]}


def test_voided_used_and_hidden_passes_are_left_out_of_the_download(stack: Stack) -> None:
    account = stack.new_account()
    passes = _passes(stack, account, 4)
    bundle = _bundle(stack, account, [made["id"] for made in passes])
    with stack.client(headers=account.headers()) as client:
        assert client.delete(f"/v1/passes/{passes[1]['id']}").status_code == 200
        # A single-use ticket scanned at the door: its wallet copy is marked used.
        scanned = ok(client.post("/v1/scans", json={"pass_id": passes[3]["id"]}))
        assert scanned["result"] == "accepted"

    entries = _entries(_get(bundle["download_url"]).content)
    page = _get(bundle["url"]).text

    serials = [_serial(pkpass) for _, pkpass in entries]
    assert serials == [passes[0]["serial_number"], passes[2]["serial_number"]]
    assert page.count('class="pass"') == 2
    assert page.count('class="pass pass-voided"') == 2
    assert "This pass has been used" in page
    assert passes[1]["download_url"] not in page
    # Passes behind download links are not reachable through a bundle's permanent URLs.
    with stack.client(headers=account.headers()) as client:
        path = f"/v1/templates/{passes[0]['template_id']}"
        assert client.patch(path, json={"require_download_link": True}).status_code == 200
    for url in (bundle["url"], bundle["download_url"]):
        hidden = _get(url)
        assert hidden.status_code == 404
        assert "We can't find this pass" in hidden.text
        assert "Acme Live" not in hidden.text


def test_an_unknown_bundle_is_the_not_found_page(stack: Stack) -> None:
    for bundle_id in ("pbdl_0000000000000000000000", "nope", "pass_0000000000000000000000"):
        for suffix in ("", ".pkpasses"):
            response = _get(f"{stack.base_url}/b/{bundle_id}{suffix}")
            assert response.status_code == 404
            assert "We can't find this pass" in response.text
            assert response.headers["cache-control"] == "no-store"
