"""Issue 12, acceptance 1: POST /v1/passes/batch. A batch of 100 rows with 3 bad ones makes 97
passes and answers 3 row errors with their params; a replay with the same Idempotency-Key
answers the same body and makes nothing; rows past the monthly quota answer 402 each, and a
row the issuer refused gives its unit back. A batch or an import retried with the same key after
its first run failed (a timeout, the issuer down) takes no unit twice.

The stack's plan table (its own stack, for that): free has room for every test here, paid's
test mode has a quota of 6 passes a month.
"""

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.api import (
    PASS_KEYS,
    TEMPLATE_BODY,
    all_passes,
    assert_error,
    create_template,
    ok,
)
from tests.support.polling import poll
from tests.support.stack import Stack, new_stack, serving

pytestmark = pytest.mark.e2e
QUOTA = 6
PLANS = {
    "free": {"rate_limit": 1_000, "monthly_passes": {"test": 1_000_000, "live": 0}},
    "paid": {"live_keys": True, "rate_limit": 1_000, "monthly_passes": {"test": QUOTA, "live": 0}},
}


@pytest.fixture(scope="module")
def stack(
    nats_url: str, mongo_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    running = new_stack(nats_url, mongo_url, tmp_path_factory.mktemp("batch-stack"))
    running.extra_env = {"TESSERA_API_PLANS": json.dumps(PLANS)}
    with serving(running):
        yield running


def _rows(template_id: str, count: int) -> list[dict[str, Any]]:
    return [
        {
            "template_id": template_id,
            "holder_name": f"Guest {n}",
            "holder_email": f"guest{n}@example.com",
            "field_values": {"seat": f"A{n}"},
        }
        for n in range(count)
    ]


def test_100_rows_with_3_bad_make_97_passes_and_a_replay_makes_nothing(stack: Stack) -> None:
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        template = create_template(client, TEMPLATE_BODY)
        rows = _rows(template["id"], 100)
        rows[3] = {**rows[3], "holder_email": "nope"}  # refused by the api
        rows[50] = {**rows[50], "field_values": {"shoe": "9"}}  # refused by the issuer
        rows[97] = {**rows[97], "template_id": "tmpl_0000000000000000000000"}
        key = {"Idempotency-Key": "batch-1"}

        response = client.post("/v1/passes/batch", json={"passes": rows}, headers=key)

        body = ok(response)
        assert body["object"] == "batch"
        assert [row["index"] for row in body["data"]] == list(range(100))
        failed = {row["index"]: row for row in body["data"] if row["status"] != 201}
        assert {i: (r["status"], r["error"]["param"]) for i, r in failed.items()} == {
            3: (400, "holder_email"),
            50: (400, "field_values.shoe"),
            97: (404, "template_id"),
        }
        for row in failed.values():
            assert set(row) == {"index", "status", "error"}
            assert set(row["error"]) == {"type", "code", "message", "param"}
        made = [row for row in body["data"] if row["status"] == 201]
        assert len(made) == 97
        assert all(set(row) == {"index", "status", "pass"} for row in made)
        assert all(set(row["pass"]) == PASS_KEYS for row in made)
        assert made[0]["pass"]["holder_name"] == "Guest 0"
        stored = all_passes(client)
        assert {p["id"] for p in stored} == {row["pass"]["id"] for row in made}

        replay = client.post("/v1/passes/batch", json={"passes": rows}, headers=key)
        assert replay.headers["Idempotent-Replayed"] == "true"
        assert replay.json() == body
        assert len(all_passes(client)) == 97
        reused = client.post("/v1/passes/batch", json={"passes": rows[:5]}, headers=key)
        assert_error(reused, 409, "idempotency_error", None, "idempotency_key_reused")

        # One created event per pass, as single creates record (webhooks: pass.issued).
        def created() -> list[str]:
            events = client.get("/v1/events", params={"limit": 200}).json()["data"]
            return [e["pass_id"] for e in events if e["type"] == "created"]

        found = poll(created, lambda ids: len(ids) >= 97, message="97 created events")
        assert sorted(found) == sorted(p["id"] for p in stored)


def test_a_batch_or_import_retried_with_its_defaults_spelled_out_is_the_same_request(
    stack: Stack,
) -> None:
    """POST /v1/passes fingerprints a body as read (defaults filled in); batch and import rows
    were fingerprinted as sent, so a retry whose client wrote `"metadata": {}` where the first
    left it out answered 409 `idempotency_key_reused` instead of the first answer."""
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        template = create_template(client, TEMPLATE_BODY)
        rows = _rows(template["id"], 2)
        spelled = [{**row, "metadata": {}} for row in rows]
        key = {"Idempotency-Key": "batch-defaults"}
        first = ok(client.post("/v1/passes/batch", json={"passes": rows}, headers=key))
        again = client.post("/v1/passes/batch", json={"passes": spelled}, headers=key)
        assert again.headers["Idempotent-Replayed"] == "true"
        assert ok(again) == first

        import_rows = [{"holder_name": "Guest", "field_values": {"seat": "B1"}}]
        body = {"type": "import_passes", "template_id": template["id"], "rows": import_rows}
        key = {"Idempotency-Key": "import-defaults"}
        job = ok(client.post("/v1/jobs", json=body, headers=key), 202)
        spelled_rows = [{**import_rows[0], "holder_email": None, "metadata": {}}]
        again = client.post("/v1/jobs", json={**body, "rows": spelled_rows}, headers=key)
        assert again.headers["Idempotent-Replayed"] == "true"
        assert ok(again, 202)["id"] == job["id"]


def test_rows_no_store_could_hold_fail_alone_in_a_batch_and_an_import(stack: Stack) -> None:
    """A row with a lone surrogate in a key, or nested deeper than pydantic dumps (256), was
    refused by its row check, then the request's fingerprint dumped the raw rows: 500."""
    surrogate = {"metadata": {"\ud800": 1}}
    deep: dict[str, Any] = {"metadata": {"a": json.loads("[" * 255 + "]" * 255)}}
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        template = create_template(client, TEMPLATE_BODY)
        good = _rows(template["id"], 1)[0]
        rows = [good, {**good, **surrogate}, {**good, **deep}]
        # As JSON writes it (\ud800 escaped): httpx2 encodes UTF-8, which has no lone surrogate.
        json_type = {"Content-Type": "application/json"}
        sent = json.dumps({"passes": rows})
        answer = ok(client.post("/v1/passes/batch", content=sent, headers=json_type))
        assert [(r["status"], r.get("error", {}).get("param")) for r in answer["data"]] == [
            (201, None),
            (400, "metadata"),
            (400, "metadata"),
        ]
        body = {
            "type": "import_passes",
            "template_id": template["id"],
            "rows": [{"holder_name": "Guest", **extra} for extra in ({}, surrogate, deep)],
        }
        job = ok(client.post("/v1/jobs", content=json.dumps(body), headers=json_type), 202)
        assert job["total"] == 3


def test_rows_past_the_quota_answer_402_each(stack: Stack) -> None:
    account = stack.new_account(plan="paid")
    with stack.client(headers=account.headers()) as client:
        template = create_template(client, TEMPLATE_BODY)
        rows = _rows(template["id"], 8)
        rows[0] = {**rows[0], "field_values": {"shoe": "9"}}  # the issuer refuses it

        body = ok(client.post("/v1/passes/batch", json={"passes": rows}))

        statuses = [row["status"] for row in body["data"]]
        assert statuses == [400, 201, 201, 201, 201, 201, 402, 402]
        for row in body["data"][6:]:
            assert row["error"]["type"] == "billing_error"
            assert row["error"]["code"] == "quota_exceeded"
        # The refused row gave its unit back: one more pass fits, then none.
        more = ok(client.post("/v1/passes/batch", json={"passes": _rows(template["id"], 2)}))
        assert [row["status"] for row in more["data"]] == [201, 402]
        assert len(all_passes(client)) == QUOTA
        single = client.post("/v1/passes", json={"template_id": template["id"]})
        assert_error(single, 402, "billing_error", None, "quota_exceeded")


def test_import_rows_the_issuer_would_refuse_take_no_unit(stack: Stack) -> None:
    """A date without its time zone passes the body's schema but not the issuer's checks: the
    rows are refused at upload, with their numbers, before the quota is reserved for them."""
    account = stack.new_account(plan="paid")
    undated = {"metadata": {"expiration_date": "2031-12-31"}}
    with stack.client(headers=account.headers()) as client:
        template = create_template(client, TEMPLATE_BODY)
        rows = [undated] * (QUOTA - 1) + [{"holder_name": "Ann"}]
        body = {"type": "import_passes", "template_id": template["id"], "rows": rows}
        job = ok(client.post("/v1/jobs", json=body), 202)

        def finished() -> dict[str, Any]:
            return ok(client.get(f"/v1/jobs/{job['id']}"))

        done = poll(finished, lambda j: j["status"] == "succeeded", message="the import done")
        assert (done["succeeded"], done["failed"]) == (1, QUOTA - 1)
        assert {e["error"]["param"] for e in done["errors"]} == {"metadata.expiration_date"}
        # One unit was taken, for the one pass: the rest of the quota is there.
        more = ok(client.post("/v1/passes/batch", json={"passes": _rows(template["id"], QUOTA)}))
        assert [row["status"] for row in more["data"]] == [201] * (QUOTA - 1) + [402]


def test_a_retry_of_a_batch_that_timed_out_takes_no_unit_twice(stack: Stack) -> None:
    """The first run reserved the whole quota and timed out while the issuer (stopped) had
    its command; the issuer then made the passes. The retry with the same key re-sends the
    same rows and answers them all 201. (It used to reserve again: no unit was left, so
    every row answered 402 for passes that existed, and that answer was kept for the key.)"""
    account = stack.new_account(plan="paid")
    with stack.client(headers=account.headers()) as client:
        template = create_template(client, TEMPLATE_BODY)
        body = {"passes": _rows(template["id"], QUOTA)}
        key = {"Idempotency-Key": "batch-while-the-issuer-is-stopped"}
        with stack.paused("issuer"):
            timed_out = client.post("/v1/passes/batch", json=body, headers=key)
        assert_error(timed_out, 500, "api_error", code="timeout")
        made = poll(lambda: all_passes(client), lambda found: len(found) == QUOTA)

        retried = ok(client.post("/v1/passes/batch", json=body, headers=key))

        assert [row["status"] for row in retried["data"]] == [201] * QUOTA
        assert sorted(row["pass"]["id"] for row in retried["data"]) == sorted(
            found["id"] for found in made
        )
        single = client.post("/v1/passes", json={"template_id": template["id"]})
        assert_error(single, 402, "billing_error", None, "quota_exceeded")


def test_an_import_retried_after_its_upload_failed_reserves_no_unit_twice(stack: Stack) -> None:
    """Imports reserve their rows' units the same way. The first run reserved the whole quota,
    and its upload failed (no issuer to take it) before any job existed; the retry with the
    same key uses that reservation. (It used to reserve again and answer 402.)"""
    account = stack.new_account(plan="paid")
    with stack.client(headers=account.headers()) as client:
        template = create_template(client, TEMPLATE_BODY)
        rows = [{"holder_name": f"Fan {n}", "field_values": {"seat": f"A{n}"}} for n in range(6)]
        body = {"type": "import_passes", "template_id": template["id"], "rows": rows}
        key = {"Idempotency-Key": "import-while-the-issuer-is-down"}
        stack.kill("issuer")
        try:
            failed = client.post("/v1/jobs", json=body, headers=key)
        finally:
            stack.start("issuer")
        assert failed.status_code >= 500, failed.text

        job = ok(client.post("/v1/jobs", json=body, headers=key), 202)

        done = poll(
            lambda: ok(client.get(f"/v1/jobs/{job['id']}")),
            lambda found: found["status"] not in ("queued", "running"),
            timeout=60,
            message="the import's end",
        )
        assert (done["status"], done["succeeded"]) == ("succeeded", QUOTA)
        assert len(all_passes(client)) == QUOTA


def test_an_empty_or_oversized_batch_is_refused_whole(stack: Stack) -> None:
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        template = create_template(client, TEMPLATE_BODY)
        for passes in ([], _rows(template["id"], 101)):
            refused = client.post("/v1/passes/batch", json={"passes": passes})
            assert_error(refused, 400, "invalid_request_error", "passes")
        assert_error(
            client.post("/v1/passes/batch", json={}), 400, "invalid_request_error", "passes"
        )
        odd = ok(client.post("/v1/passes/batch", json={"passes": ["a row?", {"template_id": 7}]}))
        assert [(row["status"], row["error"]["param"]) for row in odd["data"]] == [
            (400, None),
            (400, "template_id"),
        ]
        assert all_passes(client) == []
