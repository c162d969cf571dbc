"""Issue 12, acceptance 3, 4 and 5: template rollouts and update_passes jobs on the whole stack.

A design PATCH answers the template at its next design_version with the rollout job that
re-renders every non-voided pass: each .pkpass then carries the new design and verifies with
openssl, each registered device is pushed and fetches the new version, each pass gets one
`updated` event with the job's id and one `pass.update_pushed` webhook; voided passes stay as
they were. A second PATCH during a rollout leaves every pass at the latest version. An
update_passes job sets values on every non-voided pass with the same pushes and events.
"""

import json
import secrets
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tests.support.api import (
    TEMPLATE_BODY,
    assert_error,
    create_template,
    design,
    ok,
    post_retrying,
    send_retrying,
    walk,
)
from tests.support.apple_wallet import PASS_TYPE, pushes_to
from tests.support.emulated_iphone import EmulatedIPhone
from tests.support.fake_apns import FakeApns
from tests.support.pkpass_check import verified_pass_json
from tests.support.polling import poll
from tests.support.receiver import Receiver
from tests.support.stack import Stack

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
FINISHED = {"succeeded", "failed", "canceled"}
JSON = {"Content-Type": "application/json"}
NEW_BACKGROUND = "rgb(112, 16, 32)"


@pytest.fixture
def phones() -> Iterator[list[EmulatedIPhone]]:
    made = [EmulatedIPhone() for _ in range(10)]
    try:
        yield made
    finally:
        for phone in made:
            phone.close()


def _finished(client: httpx2.Client, job_id: str, timeout: float = 90.0) -> dict[str, Any]:
    return poll(
        lambda: ok(client.get(f"/v1/jobs/{job_id}")),
        lambda job: job["status"] in FINISHED,
        timeout,
        message=f"job {job_id} to finish",
        interval=0.2,
    )


def _issue(client: httpx2.Client, template_id: str, count: int) -> list[dict[str, Any]]:
    made: list[dict[str, Any]] = []
    for start in range(0, count, 100):
        rows = [
            {"template_id": template_id, "field_values": {"seat": f"S{n}"}}
            for n in range(start, min(count, start + 100))
        ]
        batch = post_retrying(client, "/v1/passes/batch", {"passes": rows}, uuid.uuid4().hex)
        answer = ok(batch)
        made += [row["pass"] for row in answer["data"]]
    assert len(made) == count
    return made


def _install(phones: list[EmulatedIPhone], passes: list[dict[str, Any]]) -> None:
    """The passes shared out over the phones, each downloaded and registered."""
    for n, pass_ in enumerate(passes):
        download = httpx2.get(pass_["download_url"], timeout=30.0)
        assert download.status_code == 200
        phone = phones[n % len(phones)]
        assert phone.install(download.content, download.headers.get("last-modified")) == 201


def _pass_json(client: httpx2.Client, stack: Stack, pass_: dict[str, Any], tmp: Path) -> Any:
    download = client.get(pass_["download_url"])
    assert download.status_code == 200
    return verified_pass_json(
        download.content, stack.signing_dir / "root-ca.pem", tmp / pass_["id"]
    )


def _updated_events(client: httpx2.Client, count: int) -> list[dict[str, Any]]:
    """The account's `updated` events as the issuer pushed them, once there are `count`."""
    return poll(
        lambda: [
            event
            for event in walk(client, "/v1/events", 100)
            if event["type"] == "updated" and event["metadata"].get("stage") == "pushed"
        ],
        lambda found: len(found) >= count,
        60,
        message=f"{count} updated events",
    )


def _field(pass_json: dict[str, Any], key: str) -> dict[str, Any]:
    for fields in pass_json["eventTicket"].values():
        for field in fields:
            if field["key"] == key:
                return dict(field)
    raise AssertionError(f"no field {key}")


def test_a_design_patch_rolls_out_to_every_pass_and_device(
    stack: Stack,
    fake_apns: FakeApns,
    phones: list[EmulatedIPhone],
    receiver: Receiver,
    tmp_path: Path,
) -> None:
    account = stack.new_account(plan="paid")
    hook = f"/rollout-{secrets.token_hex(4)}"
    with stack.client(headers=account.headers()) as client:
        ok(client.post("/v1/webhooks", json={"url": receiver.url(hook), "events": ["*"]}))
        template = create_template(client)
        assert (template["design_version"], template["rollout_job_id"]) == (1, None)
        passes = _issue(client, template["id"], 300)
        assert {p["design_version"] for p in passes} == {1}
        voided = [ok(client.delete(f"/v1/passes/{p['id']}")) for p in passes[-10:]]
        live = passes[:-10]
        installed = live[:50]
        _install(phones, installed)

        new_design = design(
            colors={"background": "#701020", "foreground": "#FFFFFF", "label": "#C0C0C0"},
            fields=[
                {"key": "seat", "label": "Your seat", "slot": "primary"},
                {"key": "row", "label": "Row", "slot": "secondary", "default": "-"},
            ],
        )
        patched = ok(client.patch(f"/v1/templates/{template['id']}", json={"design": new_design}))
        assert patched["design_version"] == 2
        job_id = patched["rollout_job_id"]
        assert job_id.startswith("job_")
        job = _finished(client, job_id)
        assert job["type"] == "template_rollout"
        assert job["template_id"] == template["id"]
        assert (job["status"], job["total"], job["succeeded"], job["failed"]) == (
            "succeeded",
            290,
            290,
            0,
        )
        # A PATCH that leaves the design as it is starts no rollout.
        renamed = ok(client.patch(f"/v1/templates/{template['id']}", json={"name": "Renamed"}))
        assert (renamed["design_version"], renamed["rollout_job_id"]) == (2, job_id)

        stored = {p["id"]: p for p in walk(client, "/v1/passes", 100, template_id=template["id"])}
        for pass_ in live:
            assert stored[pass_["id"]]["design_version"] == 2
            pass_json = _pass_json(client, stack, pass_, tmp_path)
            assert pass_json["backgroundColor"] == NEW_BACKGROUND
            assert _field(pass_json, "seat")["label"] == "Your seat"
            assert _field(pass_json, "seat")["value"] == pass_["field_values"]["seat"]
        for pass_ in voided:
            assert stored[pass_["id"]]["design_version"] == 1
            pass_json = _pass_json(client, stack, pass_, tmp_path)
            assert pass_json["voided"] is True
            assert pass_json["backgroundColor"] != NEW_BACKGROUND

        # Every registered device was pushed once per pass, and fetches the new versions.
        for phone in phones:
            mine = [s for s in phone.passes]
            pushes_to(fake_apns, phone.push_token, len(mine))
            sync = phone.on_push(PASS_TYPE)
            assert sync.downloads == dict.fromkeys(mine, 200)
            for serial in mine:
                assert phone.passes[serial].pass_json["backgroundColor"] == NEW_BACKGROUND
        assert sum(len(fake_apns.pushes(phone.push_token)) for phone in phones) == 50

        # One `updated` event per pass, with the job's id; none for the voided ones.
        events = _updated_events(client, 290)
        per_pass = Counter(event["pass_id"] for event in events)
        assert per_pass == Counter({p["id"]: 1 for p in live})
        assert {event["metadata"]["job_id"] for event in events} == {job_id}
        installed_ids = {p["id"] for p in installed}
        for event in events:
            expected = 1 if event["pass_id"] in installed_ids else 0
            assert event["metadata"]["devices_pushed"] == expected

    # And one pass.update_pushed delivery per pass.
    def pushed() -> list[dict[str, Any]]:
        bodies = [json.loads(r.body) for r in receiver.requests(hook)]
        return [b for b in bodies if b["type"] == "pass.update_pushed"]

    deliveries = poll(pushed, lambda found: len(found) >= 290, 60, message="290 webhooks")
    assert Counter(d["data"]["pass"]["id"] for d in deliveries) == Counter(
        {p["id"]: 1 for p in live}
    )
    assert {d["data"]["event"]["metadata"]["job_id"] for d in deliveries} == {job_id}


def test_a_second_design_patch_supersedes_a_running_rollout(stack: Stack, tmp_path: Path) -> None:
    account = stack.new_account(plan="paid")
    with stack.client(headers=account.headers()) as client:
        template = create_template(client)
        passes = _issue(client, template["id"], 400)
        url = f"/v1/templates/{template['id']}"
        # The second PATCH lands while the first rollout keeps the machine busy: both sent as
        # a careful client sends them, again with the key if the answer says to retry (a
        # loaded machine timed the first out once: it lists and chunks 400 passes).
        once = {"design": design(description="Moved once")}
        first = ok(send_retrying(client, "PATCH", url, once, uuid.uuid4().hex))
        moved = {"design": design(description="Moved twice")}
        second = ok(send_retrying(client, "PATCH", url, moved, uuid.uuid4().hex))
        assert (first["design_version"], second["design_version"]) == (2, 3)
        assert first["rollout_job_id"] != second["rollout_job_id"]
        latest = _finished(client, second["rollout_job_id"])
        assert (latest["status"], latest["succeeded"], latest["total"]) == ("succeeded", 400, 400)
        # The first stopped taking work when the second began (or had finished before).
        earlier = _finished(client, first["rollout_job_id"])
        assert earlier["status"] in {"canceled", "succeeded"}

        stored = walk(client, "/v1/passes", 100, template_id=template["id"])
        assert {p["design_version"] for p in stored} == {3}
        for pass_ in passes[::50]:
            assert _pass_json(client, stack, pass_, tmp_path)["description"] == "Moved twice"
        # No pass was built twice by the latest rollout, nor more than once by the first.
        events = _updated_events(client, 400)
        by_job = Counter((e["metadata"]["job_id"], e["pass_id"]) for e in events)
        assert all(count == 1 for count in by_job.values())
        latest_passes = {pass_id for job, pass_id in by_job if job == second["rollout_job_id"]}
        assert latest_passes == {p["id"] for p in passes}


def test_a_design_patch_during_an_import_reaches_every_pass(stack: Stack) -> None:
    """Passes an import makes while the design changes (a chunk prepared from the old design
    and committed after the rollout listed the template's passes) are rolled out by the
    rollout's closing sweep: every pass ends at the new design."""
    account = stack.new_account(plan="paid")
    with stack.client(headers=account.headers()) as client:
        template = create_template(client)
        rows = [{"holder_name": f"H{n}", "field_values": {"seat": f"S{n}"}} for n in range(1500)]
        body = {"type": "import_passes", "template_id": template["id"], "rows": rows}
        job = ok(post_retrying(client, "/v1/jobs", body, uuid.uuid4().hex), 202)
        poll(
            lambda: ok(client.get(f"/v1/jobs/{job['id']}")),
            lambda seen: seen["processed"] > 0 or seen["status"] in FINISHED,
            message="the import under way",
            interval=0.05,
        )
        url = f"/v1/templates/{template['id']}"
        moved = {"design": design(description="Moved while issuing")}
        patched = ok(send_retrying(client, "PATCH", url, moved, uuid.uuid4().hex))

        imported = _finished(client, job["id"])
        rollout = _finished(client, patched["rollout_job_id"])
        assert (imported["status"], imported["succeeded"]) == ("succeeded", 1500)
        assert rollout["status"] == "succeeded"
        assert rollout["succeeded"] == rollout["total"]
        stored = walk(client, "/v1/passes", 100, template_id=template["id"])
        assert len(stored) == 1500
        assert Counter(p["design_version"] for p in stored) == {2: 1500}


def test_update_passes_sets_values_on_every_pass_with_pushes_and_events(
    stack: Stack, fake_apns: FakeApns, phones: list[EmulatedIPhone], tmp_path: Path
) -> None:
    account = stack.new_account(plan="paid")
    with stack.client(headers=account.headers()) as client:
        template = create_template(client)
        passes = _issue(client, template["id"], 120)
        voided = [ok(client.delete(f"/v1/passes/{p['id']}")) for p in passes[-3:]]
        live = passes[:-3]
        _install(phones[:2], live[:10])

        body = {
            "type": "update_passes",
            "template_id": template["id"],
            "field_values": {"row": "K"},
            "metadata": {"gate": "4"},
        }
        created = ok(client.post("/v1/jobs", json=body), 202)
        assert (created["type"], created["template_id"]) == ("update_passes", template["id"])
        job = _finished(client, created["id"])
        assert (job["status"], job["total"], job["succeeded"], job["failed"]) == (
            "succeeded",
            117,
            117,
            0,
        )
        stored = {p["id"]: p for p in walk(client, "/v1/passes", 100, template_id=template["id"])}
        for pass_ in live:
            assert stored[pass_["id"]]["field_values"] == {
                "seat": pass_["field_values"]["seat"],
                "row": "K",
            }
            assert stored[pass_["id"]]["metadata"] == {"gate": "4"}
        for pass_ in voided:
            assert stored[pass_["id"]]["field_values"] == pass_["field_values"]
            assert stored[pass_["id"]]["metadata"] == {}
        assert _field(_pass_json(client, stack, live[-1], tmp_path), "row")["value"] == "K"
        # Each pass changed answers 200, as its PATCH would (not an import's 201).
        results = client.get(f"/v1/jobs/{created['id']}/results")
        lines = [json.loads(line) for line in results.text.splitlines()]
        assert sorted(line["pass_id"] for line in lines) == sorted(p["id"] for p in live)
        assert {line["status"] for line in lines} == {200}

        for phone in phones[:2]:
            pushes_to(fake_apns, phone.push_token, 5)
            sync = phone.on_push(PASS_TYPE)
            assert sync.downloads == dict.fromkeys(phone.passes, 200)
            for installed in phone.passes.values():
                assert installed.field("row") == {
                    "key": "row",
                    "label": "Row",
                    "value": "K",
                    "changeMessage": "Changed to %@",
                }

        events = _updated_events(client, 117)
        assert Counter(e["pass_id"] for e in events) == Counter({p["id"]: 1 for p in live})
        for event in events:
            assert event["metadata"]["job_id"] == created["id"]
            assert event["metadata"]["field_values"] == ["row"]
            assert event["metadata"]["metadata"] == ["gate"]


def test_update_passes_with_a_null_value_restores_the_template_default(
    stack: Stack, tmp_path: Path
) -> None:
    """As a PATCH with that body: null removes each pass's own value, and the field shows the
    template's default again (it was a 400, so no job could undo a value set on every pass)."""
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        template = create_template(client, TEMPLATE_BODY)  # seat defaults to "GA"
        passes = _issue(client, template["id"], 3)
        body = {"type": "update_passes", "template_id": template["id"]}
        created = ok(client.post("/v1/jobs", json={**body, "field_values": {"seat": None}}), 202)
        assert _finished(client, created["id"])["succeeded"] == 3
        for pass_ in passes:
            stored = ok(client.get(f"/v1/passes/{pass_['id']}"))
            assert "seat" not in stored["field_values"]
        assert _field(_pass_json(client, stack, passes[0], tmp_path), "seat")["value"] == "GA"


def test_update_passes_refuses_what_no_pass_could_take(stack: Stack) -> None:
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        template = create_template(client)
        base = {"type": "update_passes", "template_id": template["id"]}
        invalid = "invalid_request_error"
        cases: list[tuple[dict[str, Any], int, str, str | None]] = [
            ({**base, "field_values": {"nope": "1"}}, 400, invalid, "field_values.nope"),
            ({**base}, 400, invalid, "field_values"),
            ({**base, "field_values": {"row": "1"}, "rows": [{}]}, 400, invalid, "rows"),
            # Text that is not Unicode (a lone surrogate) could not be sent on: it was a 500.
            ({**base, "field_values": {"row": "\ud800"}}, 400, invalid, "field_values.row"),
            ({**base, "metadata": {"note": "\udfff"}}, 400, invalid, "metadata.note"),
            (
                {**base, "template_id": "tmpl_missing", "metadata": {"a": 1}},
                404,
                "not_found_error",
                "template_id",
            ),
        ]
        for body, status, type_, param in cases:
            sent = json.dumps(body)  # escaped: a surrogate goes as \ud800, as a client may send it
            answer = client.post("/v1/jobs", content=sent, headers=JSON)
            assert_error(answer, status, type_, param=param)
        assert walk(client, "/v1/jobs", 100) == []
