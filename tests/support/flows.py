"""Helpers the end-to-end flow tests share: a template body, polling, walking every page."""

import time
from collections.abc import Callable
from typing import Any, TypeVar

import httpx2

T = TypeVar("T")

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


def make_template(client: httpx2.Client, **overrides: Any) -> dict[str, Any]:
    response = client.post("/v1/templates", json={**TEMPLATE_BODY, **overrides})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def poll(fetch: Callable[[], T], done: Callable[[T], bool], timeout: float = 20.0) -> T:
    """Call `fetch` until `done(result)` or the deadline; never a fixed sleep."""
    deadline = time.monotonic() + timeout
    while True:
        result = fetch()
        if done(result):
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s; last: {result!r}")
        time.sleep(0.05)


def _walk(client: httpx2.Client, path: str, limit: int) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    params: dict[str, Any] = {"limit": limit}
    while True:
        page = client.get(path, params=params).json()
        found.extend(page["data"])
        if not page["has_more"]:
            return found
        params["starting_after"] = page["data"][-1]["id"]


def all_events(client: httpx2.Client) -> list[dict[str, Any]]:
    """Every event of the account and mode, newest first, following cursors."""
    return _walk(client, "/v1/events", 200)


def all_passes(client: httpx2.Client) -> list[dict[str, Any]]:
    return _walk(client, "/v1/passes", 100)
