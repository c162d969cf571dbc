"""The scan API on the whole stack (issue 13, acceptance 1 to 4; docs/redemption.md): policies
validate and default, passes show their counters, scans accept and reject by the policy, every
scan is listed, and 20 concurrent scans of one ticket through two api and two issuer replicas
accept exactly one, record one `redeemed` event and fire one `pass.redeemed` per webhook."""

import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import httpx2
import pytest

from tests.support.api import (
    PASS_KEYS,
    assert_error,
    create_pass,
    create_template,
    event_types,
    list_page,
    ok,
    walk,
)
from tests.support.polling import poll
from tests.support.receiver import Receiver
from tests.support.stack import Stack
from tests.support.webhooks import body_of, create_webhook

pytestmark = pytest.mark.e2e

SCAN_KEYS = {
    "id",
    "object",
    "result",
    "reason",
    "pass_id",
    "code",
    "redemption_count",
    "redemptions_remaining",
    "location",
    "metadata",
    "created_at",
    "pass",
}


@dataclass
class Ctx:
    client: httpx2.Client
    stack: Stack


@pytest.fixture
def ctx(stack: Stack) -> Iterator[Ctx]:
    account = stack.new_account()
    with stack.client(headers=account.headers("test")) as client:
        yield Ctx(client, stack)


def _iso(moment: datetime) -> str:
    return moment.isoformat()


def scan(client: httpx2.Client, **body: Any) -> dict[str, Any]:
    answer = ok(client.post("/v1/scans", json=body))
    assert set(answer) == SCAN_KEYS, answer
    assert answer["object"] == "scan"
    assert answer["id"].startswith("scan_")
    return answer


def _ticket(client: httpx2.Client, **template: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    created = create_template(client, **template)
    return created, create_pass(client, created["id"], holder_name="Ada Lovelace")


# --- acceptance 1: policies and counters -------------------------------------------------------


def test_policies_default_by_type_and_templates_show_the_effective_policy(ctx: Ctx) -> None:
    event = create_template(ctx.client)
    assert event["redemption"] == {
        "max_redemptions": 1,
        "valid_from": None,
        "valid_until": None,
        "on_limit": "mark_used",
    }
    membership = create_template(ctx.client, type="membership", apple_style="storeCard")
    assert membership["redemption"]["max_redemptions"] is None
    start = datetime(2027, 3, 1, 18, 0, tzinfo=UTC)
    custom = create_template(
        ctx.client,
        redemption={"max_redemptions": 3, "valid_from": "2027-03-01T19:00:00+01:00"},
    )
    assert custom["redemption"]["max_redemptions"] == 3
    assert custom["redemption"]["valid_from"] == "2027-03-01T18:00:00.000Z"
    assert custom["redemption"]["on_limit"] == "mark_used"
    # PATCH replaces the policy whole; null restores the type's defaults.
    patched = ok(
        ctx.client.patch(
            f"/v1/templates/{custom['id']}",
            json={"redemption": {"on_limit": "keep", "valid_until": _iso(start)}},
        )
    )
    assert patched["redemption"] == {
        "max_redemptions": 1,
        "valid_from": None,
        "valid_until": "2027-03-01T18:00:00.000Z",
        "on_limit": "keep",
    }
    reset = ok(ctx.client.patch(f"/v1/templates/{custom['id']}", json={"redemption": None}))
    assert reset["redemption"] == event["redemption"]
    got = ok(ctx.client.get(f"/v1/templates/{custom['id']}"))
    assert got["redemption"] == event["redemption"]


@pytest.mark.parametrize(
    ("redemption", "param"),
    [
        ({"max_redemptions": 0}, "redemption.max_redemptions"),
        ({"max_redemptions": "1"}, "redemption.max_redemptions"),
        ({"valid_from": "2027-01-01T00:00:00"}, "redemption.valid_from"),
        ({"valid_until": "soon"}, "redemption.valid_until"),
        # Past the last date a store holds once in UTC (it was a 500 from the issuer).
        ({"valid_until": "9999-12-31T23:59:59-23:59"}, "redemption.valid_until"),
        ({"valid_from": "0001-01-01T00:00:00+01:00"}, "redemption.valid_from"),
        (
            {"valid_from": "2027-01-02T00:00:00Z", "valid_until": "2027-01-01T00:00:00Z"},
            "redemption.valid_until",
        ),
        ({"on_limit": "void"}, "redemption.on_limit"),
        ({"uses": 2}, "redemption.uses"),
        ("once", "redemption"),
    ],
)
def test_invalid_policies_answer_400_with_a_dotted_param(
    ctx: Ctx, redemption: Any, param: str
) -> None:
    created = create_template(ctx.client)
    for response in (
        ctx.client.post(
            "/v1/templates",
            json={
                **{k: created[k] for k in ("name", "type", "apple_style", "design")},
                "redemption": redemption,
            },
        ),
        ctx.client.patch(f"/v1/templates/{created['id']}", json={"redemption": redemption}),
    ):
        assert_error(response, 400, "invalid_request_error", param=param)


def test_passes_show_their_counters(ctx: Ctx) -> None:
    _, ticket = _ticket(ctx.client)
    assert set(ticket) == PASS_KEYS
    assert (ticket["redemption_count"], ticket["last_redeemed_at"]) == (0, None)
    assert ticket["redemptions_remaining"] == 1
    scan(ctx.client, pass_id=ticket["id"])
    got = ok(ctx.client.get(f"/v1/passes/{ticket['id']}"))
    assert (got["redemption_count"], got["redemptions_remaining"]) == (1, 0)
    assert got["last_redeemed_at"] is not None
    assert got["voided"] is False  # used, not voided


# --- acceptance 2: single use, three uses, unlimited -------------------------------------------


def test_a_single_use_ticket_is_accepted_then_already_redeemed(ctx: Ctx) -> None:
    _, ticket = _ticket(ctx.client)
    first = scan(
        ctx.client, code=ticket["serial_number"], location="North gate", metadata={"lane": 2}
    )
    assert (first["result"], first["reason"], first["pass_id"]) == ("accepted", None, ticket["id"])
    assert (first["redemption_count"], first["redemptions_remaining"]) == (1, 0)
    assert (first["location"], first["metadata"]) == ("North gate", {"lane": 2})
    assert first["code"] == ticket["serial_number"]
    assert first["pass"] == {
        "id": ticket["id"],
        "holder_name": "Ada Lovelace",
        "template_id": ticket["template_id"],
        "field_values": ticket["field_values"],
    }
    second = scan(ctx.client, code=ticket["serial_number"])
    assert (second["result"], second["reason"]) == ("rejected", "already_redeemed")
    assert (second["redemption_count"], second["redemptions_remaining"]) == (1, 0)
    assert second["pass"]["id"] == ticket["id"]


def test_three_uses_then_rejected_and_unlimited_always_accepted(ctx: Ctx) -> None:
    _, three = _ticket(ctx.client, redemption={"max_redemptions": 3})
    results = [scan(ctx.client, pass_id=three["id"]) for _ in range(4)]
    assert [r["result"] for r in results] == ["accepted"] * 3 + ["rejected"]
    assert [r["redemptions_remaining"] for r in results] == [2, 1, 0, 0]
    assert results[3]["reason"] == "already_redeemed"
    _, member = _ticket(
        ctx.client, type="membership", apple_style="storeCard", redemption={"on_limit": "keep"}
    )
    counts = [scan(ctx.client, code=member["serial_number"]) for _ in range(5)]
    assert [r["result"] for r in counts] == ["accepted"] * 5
    assert [r["redemption_count"] for r in counts] == [1, 2, 3, 4, 5]
    assert {r["redemptions_remaining"] for r in counts} == {None}


def test_a_retried_scan_with_the_same_idempotency_key_replays_the_answer(ctx: Ctx) -> None:
    _, ticket = _ticket(ctx.client)
    headers = {"Idempotency-Key": str(uuid.uuid4())}
    body = {"code": ticket["serial_number"]}
    first = ok(ctx.client.post("/v1/scans", json=body, headers=headers))
    again = ok(ctx.client.post("/v1/scans", json=body, headers=headers))
    assert first == again
    assert first["result"] == "accepted"
    assert ok(ctx.client.get(f"/v1/passes/{ticket['id']}"))["redemption_count"] == 1


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({}, "code"),
        ({"code": "a", "pass_id": "pass_0000000000000000000000"}, "code"),
        ({"code": ""}, "code"),
        ({"code": "x" * 2049}, "code"),
        ({"code": 12}, "code"),
        ({"code": "a", "location": "x" * 201}, "location"),
        ({"code": "a", "metadata": {f"k{i}": i for i in range(51)}}, "metadata"),
        ({"code": "a", "metadata": {"k": "x" * 9000}}, "metadata"),
        ({"code": "a", "gate": 1}, "gate"),
    ],
)
def test_malformed_scans_answer_400(ctx: Ctx, body: dict[str, Any], param: str) -> None:
    assert_error(ctx.client.post("/v1/scans", json=body), 400, "invalid_request_error", param=param)


# --- acceptance 4: every reason, no webhook, all listed ----------------------------------------


def test_each_reason_is_answered_recorded_and_fires_no_webhook(
    ctx: Ctx, receiver: Receiver
) -> None:
    client, stack = ctx.client, ctx.stack
    hook = create_webhook(client, receiver.url("/redeemed-reasons"), ["pass.redeemed"])
    now = datetime.now(UTC)
    _, voided = _ticket(client)
    ok(client.delete(f"/v1/passes/{voided['id']}"))
    _, early = _ticket(client, redemption={"valid_from": _iso(now + timedelta(days=1))})
    _, late = _ticket(client, redemption={"valid_until": _iso(now - timedelta(minutes=1))})
    other = stack.new_account()
    with stack.client(headers=other.headers("test")) as other_client:
        _, foreign = _ticket(other_client)
    expected = {
        "unknown_code": scan(client, code=f"no-such-code-{uuid.uuid4()}"),
        "voided": scan(client, code=voided["serial_number"]),
        "not_yet_valid": scan(client, code=early["serial_number"]),
        "expired": scan(client, pass_id=late["id"]),
    }
    foreign_scan = scan(client, code=foreign["serial_number"])
    for reason, answer in expected.items():
        assert (answer["result"], answer["reason"]) == ("rejected", reason), answer
    # Another account's code answers exactly like an unknown one.
    assert (foreign_scan["reason"], foreign_scan["pass"], foreign_scan["pass_id"]) == (
        "unknown_code",
        None,
        None,
    )
    assert expected["unknown_code"]["pass"] is None
    # All listed, newest first; filters by result and by pass.
    listed = walk(client, "/v1/scans", 2)
    assert [s["id"] for s in listed] == [foreign_scan["id"]] + [
        s["id"] for s in reversed(expected.values())
    ]
    assert all(set(s) == SCAN_KEYS for s in listed)
    assert list_page(client, "/v1/scans", result="accepted")["data"] == []
    by_pass = list_page(client, f"/v1/passes/{voided['id']}/scans")["data"]
    assert [s["id"] for s in by_pass] == [expected["voided"]["id"]]
    assert [s["id"] for s in list_page(client, "/v1/scans", pass_id=late["id"])["data"]] == [
        expected["expired"]["id"]
    ]
    # No webhook and no `redeemed` event: a later accepted scan's delivery is the only one.
    _, witness = _ticket(client)
    scan(client, pass_id=witness["id"])
    [delivery] = poll(lambda: receiver.requests("/redeemed-reasons"), lambda got: len(got) >= 1)
    assert body_of(delivery)["data"]["pass"]["id"] == witness["id"]
    for rejected in (voided, early, late):
        assert "redeemed" not in event_types(client, rejected["id"])
    assert len(receiver.requests("/redeemed-reasons")) == 1
    assert hook["events"] == ["pass.redeemed"]


def test_scan_lists_page_and_refuse_bad_input(ctx: Ctx) -> None:
    _, ticket = _ticket(ctx.client, redemption={"max_redemptions": None})
    made = [scan(ctx.client, pass_id=ticket["id"])["id"] for _ in range(5)]
    assert [s["id"] for s in walk(ctx.client, "/v1/scans", 2)] == made[::-1]
    assert_error(
        ctx.client.get("/v1/scans", params={"limit": 101}),
        400,
        "invalid_request_error",
        param="limit",
    )
    assert_error(
        ctx.client.get("/v1/scans", params={"result": "maybe"}),
        400,
        "invalid_request_error",
        param="result",
    )
    assert_error(
        ctx.client.get("/v1/scans", params={"starting_after": ticket["id"]}),
        400,
        "invalid_request_error",
        param="starting_after",
    )
    missing = "pass_0000000000000000000000"
    assert_error(ctx.client.get(f"/v1/passes/{missing}/scans"), 404, "not_found_error")


# --- acceptance 3: 20 concurrent scans over two apis and two issuers ---------------------------


def test_twenty_concurrent_scans_over_two_replicas_accept_exactly_one(
    stack: Stack, receiver: Receiver
) -> None:
    if len(stack.members("api")) < 2 or len(stack.members("issuer")) < 2:
        pytest.skip("needs two replicas of the api and the issuer (TESSERA_TEST_REPLICAS)")
    account = stack.new_account("paid")
    headers = account.headers("test")
    with stack.client(headers=headers) as client:
        hooks = [
            create_webhook(client, receiver.url(path), events)
            for path, events in (("/race-a", ["pass.redeemed"]), ("/race-b", ["*"]))
        ]
        _, ticket = _ticket(client)
    bases = [f"http://{stack.host}:{m.port(stack.api_port)}" for m in stack.members("api")]
    clients = [httpx2.Client(base_url=base, headers=headers, timeout=60.0) for base in bases]

    def one(index: int) -> dict[str, Any]:
        response = clients[index % 2].post("/v1/scans", json={"code": ticket["serial_number"]})
        return ok(response)

    try:
        with ThreadPoolExecutor(max_workers=20) as pool:
            answers = list(pool.map(one, range(20)))
    finally:
        for each in clients:
            each.close()
    results = sorted((a["result"], a["reason"]) for a in answers)
    assert results == [("accepted", None)] + [("rejected", "already_redeemed")] * 19
    with stack.client(headers=headers) as client:
        assert ok(client.get(f"/v1/passes/{ticket['id']}"))["redemption_count"] == 1
        types = poll(
            lambda: event_types(client, ticket["id"]),
            lambda found: "redeemed" in found,
            message="the redeemed event",
        )
        assert types.count("redeemed") == 1
        scans = list_page(client, f"/v1/passes/{ticket['id']}/scans", limit=100)["data"]
        assert len(scans) == 20
    accepted = next(a for a in answers if a["result"] == "accepted")

    def redeemed_at(path: str) -> list[dict[str, Any]]:
        bodies = [body_of(r) for r in receiver.requests(path)]
        return [body for body in bodies if body["type"] == "pass.redeemed"]

    for path in ("/race-a", "/race-b"):
        poll(partial(redeemed_at, path), message=f"pass.redeemed at {path}")
    # Every delivery of the single-use ticket was its one `pass.redeemed` (the stream is
    # ordered: the `updated` of its mark_used re-render comes after it, and may still come).
    for path in ("/race-a", "/race-b"):
        redeemed = redeemed_at(path)
        assert len({body["id"] for body in redeemed}) == 1
        event = redeemed[0]["data"]["event"]
        assert event["type"] == "redeemed"
        assert event["metadata"] == {
            "scan_id": accepted["id"],
            "location": None,
            "redemption_count": 1,
        }
    assert len(hooks) == 2


def test_after_a_rollout_that_changes_the_barcode_the_new_code_scans(ctx: Ctx) -> None:
    """A design change can change what the barcode says: the rollout re-renders every pass,
    and the code a scanner then reads is the one looked up (the old one no longer is)."""
    template, ticket = _ticket(ctx.client)
    design = {**template["design"], "barcode": {"format": "qr", "message": "T-{short_id}"}}
    patched = ok(ctx.client.patch(f"/v1/templates/{template['id']}", json={"design": design}))
    poll(
        lambda: ok(ctx.client.get(f"/v1/jobs/{patched['rollout_job_id']}")),
        lambda job: job["status"] == "succeeded",
        60,
        message="the rollout to finish",
        interval=0.2,
    )
    old = scan(ctx.client, code=ticket["serial_number"])
    assert (old["result"], old["reason"]) == ("rejected", "unknown_code")
    new = scan(ctx.client, code=f"T-{ticket['short_id']}")
    assert (new["result"], new["pass_id"]) == ("accepted", ticket["id"])
