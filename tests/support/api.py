"""Helpers for end-to-end tests of the v1 HTTP API: error envelopes, template bodies, creating
templates and passes, and lists (one page, or every page through the cursors)."""

import time
from collections.abc import Mapping
from typing import Any

import httpx2

from tests.support.polling import poll

ERROR_KEYS = {"type", "code", "message", "param"}
_ANY = object()

PASS_KEYS = {
    "id",
    "object",
    "short_id",
    "template_id",
    "serial_number",
    "mode",
    "holder_email",
    "holder_name",
    "field_values",
    "voided",
    "voided_at",
    "metadata",
    "created_via_api",
    "design_version",
    "url",
    "download_url",
    "google_save_url",
    "created_at",
    "redemption_count",
    "last_redeemed_at",
    "redemptions_remaining",
    "google_status",
}
TEMPLATE_KEYS = {
    "id",
    "object",
    "name",
    "type",
    "apple_style",
    "design",
    "archived",
    "require_download_link",
    "design_version",
    "rollout_job_id",
    "created_at",
    "updated_at",
    "redemption",
}
EVENT_KEYS = {"id", "object", "pass_id", "type", "metadata", "created_at"}


def assert_error(
    response: httpx2.Response,
    status: int,
    type_: str,
    param: object = _ANY,
    code: object = _ANY,
) -> dict[str, Any]:
    """The response is the spec's error envelope with this status and type; returns `error`.

    `param` and `code` are checked when given (None included).
    """
    assert response.status_code != 422, response.text
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers.get("content-type", "").startswith("application/json")
    body = response.json()
    assert isinstance(body, dict), body
    assert set(body) == {"error"}, body
    error = body["error"]
    assert isinstance(error, dict), body
    assert set(error) == ERROR_KEYS, body
    assert error["type"] == type_, body
    assert isinstance(error["message"], str), body
    assert error["message"], body
    assert error["code"] is None or isinstance(error["code"], str), body
    assert error["param"] is None or isinstance(error["param"], str), body
    if param is not _ANY:
        assert error["param"] == param, body
    if code is not _ANY:
        assert error["code"] == code, body
    result: dict[str, Any] = error
    return result


def ok(response: httpx2.Response, status: int = 200) -> dict[str, Any]:
    """The JSON body of a successful response (asserting its status)."""
    assert response.status_code == status, (response.status_code, response.text)
    body: dict[str, Any] = response.json()
    return body


def design(**overrides: Any) -> dict[str, Any]:
    value: dict[str, Any] = {
        "organization_name": "Acme Events",
        "description": "Concert ticket",
        "colors": {"background": "#102030", "foreground": "#FFFFFF", "label": "#C0C0C0"},
        "fields": [
            {"key": "seat", "label": "Seat", "slot": "primary"},
            {"key": "row", "label": "Row", "slot": "secondary", "default": "-"},
        ],
        "barcode": {"format": "qr", "message": "{serial_number}"},
    }
    value.update(overrides)
    return value


def template_body(**overrides: Any) -> dict[str, Any]:
    """The template the API tests check shapes with: colors, and a field with a default."""
    body: dict[str, Any] = {
        "name": "Gig",
        "type": "event",
        "apple_style": "eventTicket",
        "design": design(),
    }
    body.update(overrides)
    return body


# The template the flow tests issue from: a concert ticket whose seat has a default.
TEMPLATE_BODY: dict[str, Any] = {
    "name": "Concert",
    "type": "event",
    "apple_style": "eventTicket",
    "design": {
        "organization_name": "Acme Live",
        "description": "Concert ticket",
        "fields": [
            {"key": "seat", "label": "Seat", "slot": "primary", "default": "GA"},
            {"key": "gate", "label": "Gate", "slot": "secondary"},
        ],
        "barcode": {"format": "qr", "message": "{serial_number}"},
    },
}


def create_template(
    client: httpx2.Client, body: Mapping[str, Any] | None = None, **overrides: Any
) -> dict[str, Any]:
    """Create a template from `body` (default: `template_body()`) with top-level `overrides`."""
    sent = {**(template_body() if body is None else body), **overrides}
    return ok(client.post("/v1/templates", json=sent))


# What a 500 says when the request may be retried with the same Idempotency-Key.
RETRYABLE_CODES = frozenset({"timeout", "write_conflict", "service_unavailable"})


def post_retrying(
    client: httpx2.Client, path: str, body: Any, key: str, within: float = 90.0
) -> httpx2.Response:
    """POST as a careful client does: with an Idempotency-Key, sent again after an answer
    that says to retry (a loaded machine may time a long command out, or a write may keep
    meeting a concurrent job's), for up to `within` seconds; the last answer."""
    return send_retrying(client, "POST", path, body, key, within)


def send_retrying(
    client: httpx2.Client, method: str, path: str, body: Any, key: str, within: float = 90.0
) -> httpx2.Response:
    """`post_retrying` for any method that takes an Idempotency-Key (POST, PATCH)."""
    headers = {"Idempotency-Key": key}
    deadline = time.monotonic() + within
    while True:
        response = client.request(method, path, json=body, headers=headers)
        retryable = (
            response.status_code >= 500 and response.json()["error"]["code"] in RETRYABLE_CODES
        )
        if not retryable or time.monotonic() >= deadline:
            return response


def create_pass(client: httpx2.Client, template_id: str, **fields: Any) -> dict[str, Any]:
    return ok(client.post("/v1/passes", json={"template_id": template_id, **fields}))


def list_page(client: httpx2.Client, path: str, **params: Any) -> dict[str, Any]:
    body = ok(client.get(path, params=params))
    assert body["object"] == "list", body
    assert isinstance(body["data"], list), body
    assert isinstance(body["has_more"], bool), body
    assert set(body) == {"object", "data", "has_more"}, body
    return body


def ids(page: dict[str, Any]) -> list[str]:
    return [item["id"] for item in page["data"]]


def walk(client: httpx2.Client, path: str, limit: int, **params: Any) -> list[dict[str, Any]]:
    """Every item of a list, newest first, following starting_after until has_more is false."""
    seen: list[dict[str, Any]] = []
    query = dict(params, limit=limit)
    for _ in range(10_000):
        page = list_page(client, path, **query)
        assert len(page["data"]) <= limit
        seen.extend(page["data"])
        if not page["has_more"]:
            return seen
        assert len(page["data"]) == limit, page
        query["starting_after"] = page["data"][-1]["id"]
    raise AssertionError("paging did not end")


def page_forward(client: httpx2.Client, path: str, limit: int, **params: Any) -> list[str]:
    """All ids of a list, newest first, `limit` a page."""
    return [item["id"] for item in walk(client, path, limit, **params)]


def all_events(client: httpx2.Client) -> list[dict[str, Any]]:
    """Every event of the account and mode, newest first."""
    return walk(client, "/v1/events", 200)


def all_passes(client: httpx2.Client) -> list[dict[str, Any]]:
    return walk(client, "/v1/passes", 100)


def event_types(client: httpx2.Client, pass_id: str) -> list[str]:
    page = list_page(client, f"/v1/passes/{pass_id}/events")
    return [event["type"] for event in page["data"]]


def wait_for_events(
    client: httpx2.Client, pass_id: str, expected: list[str], timeout: float = 10.0
) -> list[dict[str, Any]]:
    """Wait until the pass's events (newest first) have exactly the types `expected`."""

    def events() -> list[dict[str, Any]]:
        data: list[dict[str, Any]] = list_page(client, f"/v1/passes/{pass_id}/events")["data"]
        return data

    return poll(
        events,
        lambda data: [event["type"] for event in data] == expected,
        timeout,
        message=f"events {expected} of {pass_id}",
    )
