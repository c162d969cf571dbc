"""Issue 15: every date the API takes reaches pass.json in W3C form, or is refused with its param.

A W3C date (what pass.json holds) allows only `Z` or `+hh:mm`; Python also reads an offset
with seconds (`+05:30:15`), which Wallet, passkit-generator and pass-js refuse. Each way a date
enters is tried here with such an offset: the design (its dates, its relevance windows, a date
field's default), POST /v1/passes (metadata dates, a date field's value), PATCH, the batch, an
import job's rows, an update_passes job and Variant A. Also: a pass of a design with dates,
windows and translations carries W3C dates, `relevantDates` and its source language's folder.
"""

import io
import re
import zipfile
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tests.support.api import assert_error, create_pass, create_template, ok
from tests.support.pkpass_check import verified_pass_json
from tests.support.polling import poll
from tests.support.stack import Stack
from tests.support.variant_a import post_passes

pytestmark = pytest.mark.e2e

W3C_DATE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})")
SECONDS = "2031-06-01T20:00:00+05:30:15"  # an offset with seconds: not a W3C date
TEMPLATE: dict[str, Any] = {
    "name": "Festival",
    "type": "event",
    "apple_style": "eventTicket",
    "design": {
        "organization_name": "Acme Live",
        "description": "Festival ticket",
        "fields": [
            {"key": "starts", "label": "Starts", "slot": "header", "date_style": "medium"},
            {"key": "seat", "label": "Seat", "slot": "primary", "default": "GA"},
        ],
        "localizations": {"fr": {"Seat": "Place"}, "pt-BR": {"Seat": "Assento"}},
        "expiration_date": "2031-06-03T23:59:00+02:00",
        "relevant_dates": [
            {"start_date": "2031-06-01T16:00:00+02:00", "end_date": "2031-06-01T23:30:00+02:00"},
            {"start_date": "2031-06-02T16:00:00+02:00", "end_date": "2031-06-02T23:30:00+02:00"},
        ],
    },
}


def _dates(pass_json: dict[str, Any]) -> list[str]:
    found = [pass_json[key] for key in ("expirationDate", "relevantDate") if key in pass_json]
    for entry in pass_json.get("relevantDates", []):
        found += entry.values()
    for fields in pass_json["eventTicket"].values():
        found += [field["value"] for field in fields if "dateStyle" in field]
    return found


def _download(client: httpx2.Client, download_url: str) -> bytes:
    response = client.get(download_url)
    assert response.status_code == 200, response.text
    return response.content


def test_a_pass_has_w3c_dates_relevant_dates_and_its_source_language(
    stack: Stack, tmp_path: Path
) -> None:
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        template = create_template(client, TEMPLATE)
        assert template["design"]["source_language"] == "en"
        made = create_pass(
            client, template["id"], field_values={"starts": "2031-06-01T20:00+02:00"}
        )
        pkpass = _download(client, made["download_url"])

    pass_json = verified_pass_json(pkpass, stack.signing_dir / "root-ca.pem", tmp_path)
    assert pass_json["relevantDates"] == [
        {"startDate": "2031-06-01T16:00:00+02:00", "endDate": "2031-06-01T23:30:00+02:00"},
        {"startDate": "2031-06-02T16:00:00+02:00", "endDate": "2031-06-02T23:30:00+02:00"},
    ]
    assert pass_json["relevantDate"] == "2031-06-01T16:00:00+02:00"  # for iOS before 18
    assert pass_json["eventTicket"]["headerFields"][0]["value"] == "2031-06-01T20:00:00+02:00"
    assert all(W3C_DATE.fullmatch(value) for value in _dates(pass_json)), _dates(pass_json)
    names = zipfile.ZipFile(io.BytesIO(pkpass)).namelist()
    assert [name for name in names if name.endswith(".strings")] == [
        "en.lproj/pass.strings",
        "fr.lproj/pass.strings",
        "pt-BR.lproj/pass.strings",
    ]


@pytest.mark.parametrize(
    ("design", "param"),
    [
        ({"expiration_date": SECONDS}, "design.expiration_date"),
        ({"relevant_date": SECONDS}, "design.relevant_date"),
        (
            {"relevant_dates": [{"start_date": SECONDS, "end_date": "2031-06-02T00:00Z"}]},
            "design.relevant_dates.0.start_date",
        ),
        (
            {
                "relevant_dates": [
                    {"start_date": "2031-06-02T00:00Z", "end_date": "2031-06-01T00:00Z"}
                ]
            },
            "design.relevant_dates.0",
        ),
        (
            {
                "fields": [
                    {
                        "key": "starts",
                        "label": "S",
                        "slot": "header",
                        "date_style": "short",
                        "default": SECONDS,
                    }
                ]
            },
            "design.fields.0",
        ),
        ({"source_language": "English"}, "design.source_language"),
    ],
)
def test_a_design_date_with_a_seconds_offset_is_refused(
    stack: Stack, design: dict[str, Any], param: str
) -> None:
    account = stack.new_account()
    body = {**TEMPLATE, "design": {**TEMPLATE["design"], **design}}
    with stack.client(headers=account.headers()) as client:
        assert_error(client.post("/v1/templates", json=body), 400, "invalid_request_error", param)
        template = create_template(client, TEMPLATE)
        patched = client.patch(f"/v1/templates/{template['id']}", json={"design": body["design"]})
        assert_error(patched, 400, "invalid_request_error", param)
        assert ok(client.get(f"/v1/templates/{template['id']}"))["design_version"] == 1


# What a pass body may carry with such an offset, and the param that names it.
PASS_DATES = [
    ({"metadata": {"expiration_date": SECONDS}}, "metadata.expiration_date"),
    ({"metadata": {"relevant_date": SECONDS}}, "metadata.relevant_date"),
    ({"field_values": {"starts": SECONDS}}, "field_values.starts"),
]


@pytest.mark.parametrize(("fields", "param"), PASS_DATES)
def test_post_passes_refuses_a_seconds_offset(
    stack: Stack, fields: dict[str, Any], param: str
) -> None:
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        template = create_template(client, TEMPLATE)
        refused = client.post("/v1/passes", json={"template_id": template["id"], **fields})
        error = assert_error(refused, 400, "invalid_request_error", param)
        assert "offset with seconds" in error["message"]
        assert ok(client.get("/v1/passes"))["data"] == []


@pytest.mark.parametrize(("fields", "param"), PASS_DATES)
def test_patch_refuses_a_seconds_offset_and_changes_nothing(
    stack: Stack, fields: dict[str, Any], param: str
) -> None:
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        template = create_template(client, TEMPLATE)
        made = create_pass(client, template["id"])
        refused = client.patch(f"/v1/passes/{made['id']}", json=fields)
        assert_error(refused, 400, "invalid_request_error", param)
        after = ok(client.get(f"/v1/passes/{made['id']}"))
        assert (after["field_values"], after["metadata"]) == (
            made["field_values"],
            made["metadata"],
        )


def test_batch_rows_with_a_seconds_offset_fail_alone(stack: Stack) -> None:
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        template = create_template(client, TEMPLATE)
        rows = [{"template_id": template["id"], **fields} for fields, _ in PASS_DATES]
        rows.append(
            {"template_id": template["id"], "metadata": {"relevant_date": "2031-06-01T20:00Z"}}
        )

        body = ok(client.post("/v1/passes/batch", json={"passes": rows}))

    outcome = [(row["status"], row.get("error", {}).get("param")) for row in body["data"]]
    assert outcome == [*((400, param) for _, param in PASS_DATES), (201, None)]


def _finished(client: httpx2.Client, job_id: str) -> dict[str, Any]:
    return poll(
        lambda: ok(client.get(f"/v1/jobs/{job_id}")),
        lambda job: job["status"] in {"succeeded", "failed", "canceled"},
        90.0,
        message=f"job {job_id} to finish",
        interval=0.2,
    )


def test_import_rows_with_a_seconds_offset_fail_alone(stack: Stack) -> None:
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        template = create_template(client, TEMPLATE)
        rows = [fields for fields, _ in PASS_DATES] + [{"holder_name": "Ada"}]
        job = {"type": "import_passes", "template_id": template["id"], "rows": rows}

        done = _finished(client, ok(client.post("/v1/jobs", json=job), 202)["id"])

    assert (done["status"], done["succeeded"], done["failed"]) == ("succeeded", 1, 3)
    errors = {entry["row"]: entry["error"]["param"] for entry in done["errors"]}
    assert errors == {number: param for number, (_, param) in enumerate(PASS_DATES, start=1)}


@pytest.mark.parametrize(("fields", "param"), PASS_DATES)
def test_an_update_passes_job_with_a_seconds_offset_is_refused(
    stack: Stack, fields: dict[str, Any], param: str
) -> None:
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        template = create_template(client, TEMPLATE)
        create_pass(client, template["id"])
        job = {"type": "update_passes", "template_id": template["id"], **fields}

        assert_error(client.post("/v1/jobs", json=job), 400, "invalid_request_error", param)
        assert ok(client.get("/v1/jobs"))["data"] == []


@pytest.mark.parametrize(
    ("data", "named"),
    [
        ({"starts": SECONDS}, "data.starts"),
        ({"metadata": {"expiration_date": SECONDS}}, "metadata.expiration_date"),
    ],
)
def test_variant_a_refuses_a_seconds_offset(stack: Stack, data: dict[str, Any], named: str) -> None:
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        template = create_template(client, TEMPLATE)

    response = post_passes(stack, {"templateId": template["id"], "data": data}, account.test_key)

    assert response.status_code == 400, response.text
    assert set(response.json()) == {"message"}
    assert named in response.json()["message"]
    assert "offset with seconds" in response.json()["message"]
