"""Holder data that can be corrected and erased (issue 16 section 3, acceptance 4;
docs/privacy.md), on the whole stack.

PATCH corrects the holder's name and email (pushed like a field change) and a null field value
restores the template's default. `POST /v1/passes/{id}/redact` erases the holder's data, the
field values and the metadata, voids the pass and rebuilds its file; afterwards no collection of
the stack's database holds any of it: not the pass, nor the stored answers of idempotent
requests and commands, nor the events' metadata, nor the webhook delivery bodies kept in the
history, nor the scan records. Every personal value the test sends carries one random marker,
and every document of every collection is searched for it, byte by byte."""

import io
import secrets
import uuid
import zipfile
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from bson.raw_bson import RawBSONDocument
from pymongo import MongoClient

from tests.support.api import TEMPLATE_BODY, assert_error, create_template, ok
from tests.support.polling import poll
from tests.support.receiver import Receiver
from tests.support.stack import Stack
from tests.support.webhooks import body_of, create_webhook, deliveries

pytestmark = pytest.mark.e2e


@pytest.fixture
def client(stack: Stack) -> Iterator[httpx2.Client]:
    account = stack.new_account()
    with stack.client(headers=account.headers("test")) as api:
        yield api


def _key() -> dict[str, str]:
    return {"Idempotency-Key": f"k-{uuid.uuid4().hex}"}


def _holding(stack: Stack, marker: bytes) -> dict[str, list[str]]:
    """Every collection of the stack's database with the ids of its documents that contain
    `marker` anywhere in their BSON bytes."""
    with MongoClient(stack.mongo_url, document_class=RawBSONDocument) as mongo:
        db = mongo[stack.database]
        found: dict[str, list[str]] = {}
        for name in db.list_collection_names():
            for doc in db[name].find():
                if marker in doc.raw:
                    found.setdefault(name, []).append(repr(doc["_id"]))
        return found


def test_patch_corrects_the_holder_and_null_restores_a_field_default(
    client: httpx2.Client,
) -> None:
    template = create_template(client, TEMPLATE_BODY)
    issued = ok(
        client.post(
            "/v1/passes",
            json={
                "template_id": template["id"],
                "holder_name": "Ada Lovelace",
                "holder_email": "ada@example.com",
                "field_values": {"seat": "A1", "gate": "3"},
            },
        )
    )
    changed = ok(
        client.patch(
            f"/v1/passes/{issued['id']}",
            json={
                "holder_name": "Ada King",
                "holder_email": "Ada.King@Example.com",
                "field_values": {"seat": None},
            },
        )
    )
    assert changed["holder_name"] == "Ada King"
    assert changed["holder_email"] == "Ada.King@example.com"  # EmailStr lowercases the domain
    assert changed["field_values"] == {"gate": "3"}  # the seat shows its default again
    pass_json = _pass_json(client, changed)
    assert '"GA"' in pass_json
    assert '"A1"' not in pass_json
    found = ok(client.get("/v1/passes", params={"holder_email": "ada.king@example.com"}))
    assert [row["id"] for row in found["data"]] == [issued["id"]]
    removed = ok(client.patch(f"/v1/passes/{issued['id']}", json={"holder_email": None}))
    assert removed["holder_email"] is None
    assert removed["holder_name"] == "Ada King"

    # Events name what changed, never the values (recorded by the events consumer: polled).
    updates = poll(
        lambda: ok(client.get(f"/v1/passes/{issued['id']}/events", params={"type": "updated"})),
        lambda page: len(page["data"]) == 2,
        message="both updates recorded",
    )["data"]
    holders = sorted(row["metadata"]["holder"] for row in updates)
    assert holders == [["holder_email"], ["holder_email", "holder_name"]]
    assert "Ada" not in str(updates)


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"holder_email": "not-an-email"}, "holder_email"),
        ({"holder_name": "x" * 201}, "holder_name"),
        ({"field_values": None}, "field_values"),
        ({}, None),
    ],
)
def test_patch_refuses_bad_holder_fields(
    client: httpx2.Client, body: dict[str, Any], param: str | None
) -> None:
    template = create_template(client, TEMPLATE_BODY)
    issued = ok(client.post("/v1/passes", json={"template_id": template["id"]}))
    answer = client.patch(f"/v1/passes/{issued['id']}", json=body)
    assert_error(answer, 400, "invalid_request_error", param)


def test_redact_erases_every_copy_of_the_holders_data(
    stack: Stack, client: httpx2.Client, receiver: Receiver
) -> None:
    marker = secrets.token_hex(8)
    path = f"/redact-{uuid.uuid4().hex}"
    # A receiver that echoes what it got (its answer is stored with the delivery).
    receiver.behave(path, body=f"received the pass of Holder {marker}")
    webhook = create_webhook(client, receiver.url(path))
    # Its barcode shows a field value: the code a scan read is the holder's data too.
    design = {
        **TEMPLATE_BODY["design"],
        "barcode": {"format": "qr", "message": "{field_values.seat}"},
    }
    template = create_template(client, {**TEMPLATE_BODY, "design": design})
    create_key = _key()
    create_body = {
        "template_id": template["id"],
        "holder_name": f"Holder {marker}",
        "holder_email": f"holder.{marker}@example.com",
        "field_values": {"seat": f"Row {marker}"},
        "metadata": {"crm": f"crm-{marker}"},
    }
    issued = ok(client.post("/v1/passes", headers=create_key, json=create_body))
    pass_id = issued["id"]
    ok(
        client.patch(
            f"/v1/passes/{pass_id}",
            headers=_key(),
            json={"holder_email": f"new.{marker}@example.com", "field_values": {"gate": marker}},
        )
    )
    ok(client.post("/v1/scans", headers=_key(), json={"pass_id": pass_id}))
    scanned = ok(client.post("/v1/scans", headers=_key(), json={"code": f"Row {marker}"}))
    assert scanned["pass_id"] == pass_id
    kinds = {"pass.issued", "pass.update_pushed", "pass.redeemed"}
    poll(
        lambda: kinds <= {body_of(r)["type"] for r in receiver.requests(path)},
        timeout=30,
        message="the webhooks of the issue, the update and the scan",
    )
    # A resend (with a key): its answer and the webhooks service's record of the command hold
    # the delivery, the receiver's answer and (the record) its body.
    sent = [d for d in deliveries(client, webhook["id"]) if d["event_type"] == "pass.issued"]
    resend = f"/v1/webhooks/{webhook['id']}/deliveries/{sent[0]['id']}/resend"
    assert marker in ok(client.post(resend, headers=_key()))["response_body"]
    assert _holding(stack, marker.encode())  # the test would find a copy

    receiver.behave(path, body="ok")  # what it echoes of the redaction's event holds no marker
    redact_key = _key()
    redacted = ok(client.post(f"/v1/passes/{pass_id}/redact", headers=redact_key))
    assert redacted["voided"] is True
    assert redacted["holder_name"] is None
    assert redacted["holder_email"] is None
    assert redacted["field_values"] == {}
    assert redacted["metadata"] == {}

    poll(
        lambda: _holding(stack, marker.encode()),
        lambda found: not found,
        timeout=30,
        message="every copy of the holder's data erased (collection: ids still holding it)",
    )
    voided = [body_of(r) for r in receiver.requests(path) if body_of(r)["type"] == "pass.voided"]
    assert voided
    assert voided[0]["data"]["event"]["metadata"]["reason"] == "redacted"
    assert voided[0]["data"]["pass"]["holder_email"] is None

    # Every other event keeps its type and time only; an older event recorded just after the
    # redaction (consumers take batches in parallel) is erased by the second erasure, later.
    def erased(events: list[dict[str, Any]]) -> bool:
        redactions = [e for e in events if e["metadata"].get("reason") == "redacted"]
        others = [e for e in events if e not in redactions]
        return len(redactions) == 1 and all(e["metadata"] == {} for e in others)

    poll(
        lambda: ok(client.get(f"/v1/passes/{pass_id}/events"))["data"],
        erased,
        timeout=30,
        message="the redaction recorded and every other event's metadata erased",
    )
    assert marker not in _pass_json(client, redacted)
    # A retried create answers the stored answer, without the erased data.
    again = ok(client.post("/v1/passes", headers=create_key, json=create_body))
    assert again["id"] == pass_id
    assert marker not in str(again)
    # Redacting again is allowed and answers the redacted pass.
    assert ok(client.post(f"/v1/passes/{pass_id}/redact", headers=redact_key))["id"] == pass_id
    assert_error(client.post("/v1/passes/pass_nothing/redact"), 404, "not_found_error", None)


def _pass_json(client: httpx2.Client, issued: dict[str, Any]) -> str:
    response = client.get(issued["download_url"])
    assert response.status_code == 200, response.text
    with zipfile.ZipFile(io.BytesIO(response.content)) as bundle:
        return bundle.read("pass.json").decode()


def test_a_redaction_leaves_the_scans_that_named_another_pass(client: httpx2.Client) -> None:
    """A redaction erases its code from the scans that read it without naming a pass; it also
    erased it from accepted scans of other passes whose barcode showed the same text (a
    constant message of another template, made by anyone with the account's test key), in the
    scan records and in the stored answers of scan requests."""
    code = f"M-{secrets.token_hex(4)}"
    member = {
        **TEMPLATE_BODY["design"],
        "barcode": {"format": "qr", "message": "{field_values.seat}"},
    }
    holder = create_template(client, {**TEMPLATE_BODY, "design": member})
    kept = ok(
        client.post(
            "/v1/passes", json={"template_id": holder["id"], "field_values": {"seat": code}}
        )
    )
    scan_key = _key()
    scanned = ok(client.post("/v1/scans", headers=scan_key, json={"code": code}))
    assert (scanned["pass_id"], scanned["code"]) == (kept["id"], code)
    constant = {**TEMPLATE_BODY["design"], "barcode": {"format": "qr", "message": code}}
    other = create_template(client, {**TEMPLATE_BODY, "design": constant})
    copied = ok(client.post("/v1/passes", json={"template_id": other["id"]}))

    ok(client.post(f"/v1/passes/{copied['id']}/redact"))

    listed = ok(client.get("/v1/scans"))["data"]
    assert [(s["pass_id"], s["code"]) for s in listed] == [(kept["id"], code)]
    replayed = ok(client.post("/v1/scans", headers=scan_key, json={"code": code}))
    assert replayed["code"] == code
