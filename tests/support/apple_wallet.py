"""Helpers for the Apple Wallet end-to-end tests: a pass as a holder downloads it, waiting for
an event of a pass, and for pushes at the fake APNs."""

from typing import Any

import httpx2

from tests.support.api import create_pass, create_template, list_page
from tests.support.fake_apns import FakeApns, Push
from tests.support.polling import poll

PASS_TYPE = "pass.dev.tessera"  # the issuer's default pass type identifier


def issue_and_download(client: httpx2.Client) -> tuple[dict[str, Any], bytes, str | None]:
    """A new pass, and its .pkpass as a holder downloads it from `download_url`."""
    template = create_template(client)
    pass_ = create_pass(client, template["id"], field_values={"seat": "12A"})
    download = httpx2.get(pass_["download_url"], timeout=30.0)
    assert download.status_code == 200
    return pass_, download.content, download.headers.get("last-modified")


def event_where(client: httpx2.Client, pass_id: str, type_: str, **metadata: Any) -> dict[str, Any]:
    """Wait for the pass's newest event of `type_` whose metadata has these values."""

    def matching() -> list[dict[str, Any]]:
        events = list_page(client, f"/v1/passes/{pass_id}/events")["data"]
        return [
            event
            for event in events
            if event["type"] == type_
            and all(event["metadata"].get(key) == value for key, value in metadata.items())
        ]

    found: dict[str, Any] = poll(matching, bool)[0]
    return found


def pushes_to(fake_apns: FakeApns, token: str, count: int) -> list[Push]:
    return poll(lambda: fake_apns.pushes(token), lambda found: len(found) >= count)
