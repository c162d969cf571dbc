"""Helpers for end-to-end tests of the v1 HTTP API: error envelopes, templates, passes, lists."""

from typing import Any

import httpx2

from tests.support.polling import wait_for

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
    "url",
    "download_url",
    "created_at",
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
    "created_at",
    "updated_at",
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
    body: dict[str, Any] = {
        "name": "Gig",
        "type": "event",
        "apple_style": "eventTicket",
        "design": design(),
    }
    body.update(overrides)
    return body


def create_template(client: httpx2.Client, **overrides: Any) -> dict[str, Any]:
    return ok(client.post("/v1/templates", json=template_body(**overrides)))


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


def page_forward(client: httpx2.Client, path: str, limit: int, **params: Any) -> list[str]:
    """All ids of a list, newest first, following starting_after until has_more is false."""
    seen: list[str] = []
    cursor: str | None = None
    for _ in range(10_000):
        query = dict(params, limit=limit)
        if cursor is not None:
            query["starting_after"] = cursor
        page = list_page(client, path, **query)
        assert len(page["data"]) <= limit
        seen.extend(ids(page))
        if not page["has_more"]:
            return seen
        assert len(page["data"]) == limit, page
        cursor = page["data"][-1]["id"]
    raise AssertionError("paging did not end")


def event_types(client: httpx2.Client, pass_id: str) -> list[str]:
    page = list_page(client, f"/v1/passes/{pass_id}/events")
    return [event["type"] for event in page["data"]]


def wait_for_events(
    client: httpx2.Client, pass_id: str, expected: list[str], timeout: float = 10.0
) -> list[dict[str, Any]]:
    """Wait until the pass's events (newest first) have exactly the types `expected`."""

    last: list[str] = []

    def settled() -> list[dict[str, Any]] | None:
        page = list_page(client, f"/v1/passes/{pass_id}/events")
        data: list[dict[str, Any]] = page["data"]
        last[:] = [event["type"] for event in data]
        return data if last == expected else None

    try:
        return wait_for(settled, timeout, message=f"events {expected} of {pass_id}")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; last event types seen: {last}") from None
