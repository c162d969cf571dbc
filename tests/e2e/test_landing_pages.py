"""The permanent pass URLs over HTTP on the whole stack: landing page, .pkpass, Google redirect.

Buttons per platform, the QR handoff, voided passes, the events each GET records (and HEAD and
bots do not), require_download_link switching both ways, HTML 404s and the security headers.
"""

import asyncio
import re
from dataclasses import dataclass
from typing import Any

import httpx2
import nats
import pytest
from nats.aio.msg import Msg
from pymongo import MongoClient

from services.api.observed_limit import PER_PASS_PER_MINUTE
from services.api.pages.qr import qr_svg
from tests.support.api import TEMPLATE_BODY, create_template, ok
from tests.support.polling import poll
from tests.support.stack import Account, Stack
from tests.support.user_agents import ANDROID, DESKTOP, GOOGLEBOT, IPHONE, SLACKBOT

pytestmark = pytest.mark.e2e


@dataclass
class Issued:
    account: Account
    template: dict[str, Any]
    pass_: dict[str, Any]

    @property
    def url(self) -> str:
        return str(self.pass_["url"])


def _issue(stack: Stack, **body: Any) -> Issued:
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        template = create_template(client, TEMPLATE_BODY)
        response = client.post(
            "/v1/passes",
            json={"template_id": template["id"], "field_values": {"seat": "C3"}, **body},
        )
    assert response.status_code == 200, response.text
    return Issued(account, template, response.json())


def _get(url: str, user_agent: str = DESKTOP, method: str = "GET") -> httpx2.Response:
    return httpx2.request(method, url, headers={"User-Agent": user_agent}, timeout=30.0)


def _buttons(html: str) -> set[str]:
    return set(re.findall(r'data-wallet="(\w+)"', html))


def _events(stack: Stack, issued: Issued, event_type: str) -> list[dict[str, Any]]:
    with stack.client(headers=issued.account.headers()) as client:
        page = client.get(f"/v1/passes/{issued.pass_['id']}/events").json()
    return [event for event in page["data"] if event["type"] == event_type]


def _wait_events(stack: Stack, issued: Issued, event_type: str, count: int) -> list[Any]:
    return poll(lambda: _events(stack, issued, event_type), lambda found: len(found) >= count)


def _assert_page_headers(response: httpx2.Response) -> None:
    csp = response.headers["content-security-policy"]
    for directive in (
        "default-src 'none'",
        "img-src 'self' data:",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    ):
        assert directive in csp
    assert re.search(r"style-src 'self'( 'sha256-[A-Za-z0-9+/=]+')*;", csp)
    assert response.headers["referrer-policy"] == "no-referrer"
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["cache-control"] == "no-store"
    assert response.headers["content-type"].startswith("text/html")


def _assert_not_found_page(response: httpx2.Response, issued: Issued | None = None) -> None:
    assert response.status_code == 404
    _assert_page_headers(response)
    assert "We can't find this pass" in response.text
    if issued is not None:
        for secret in ("Acme Live", "Concert ticket", "C3", issued.pass_["short_id"]):
            assert secret not in response.text


def test_each_platform_gets_its_buttons(stack: Stack) -> None:
    issued = _issue(stack, holder_name="Ada Lovelace")
    ios, android, desktop = (_get(issued.url, agent) for agent in (IPHONE, ANDROID, DESKTOP))
    for response in (ios, android, desktop):
        assert response.status_code == 200
        _assert_page_headers(response)
        assert "Acme Live" in response.text
        assert "Ada Lovelace" in response.text
        assert ">C3<" in response.text
    assert _buttons(ios.text) == {"apple"}
    assert f'href="{issued.pass_["download_url"]}"' in ios.text
    assert _buttons(android.text) == {"google"}
    assert f'href="{issued.url}/google"' in android.text
    assert _buttons(desktop.text) == {"apple", "google"}


def test_only_the_desktop_page_has_the_qr_handoff_and_it_encodes_the_page(stack: Stack) -> None:
    issued = _issue(stack)
    desktop = _get(issued.url, DESKTOP).text
    assert re.findall(r'data-qr-content="([^"]+)"', desktop) == [issued.url]
    # The SVG is the code segno makes for the page URL (the browser test decodes it for real).
    assert qr_svg(issued.url) in desktop
    for agent in (IPHONE, ANDROID):
        assert "data-qr-content" not in _get(issued.url, agent).text


def test_a_voided_pass_shows_it_and_offers_no_buttons(stack: Stack) -> None:
    issued = _issue(stack)
    with stack.client(headers=issued.account.headers()) as client:
        assert client.delete(f"/v1/passes/{issued.pass_['id']}").status_code == 200
    for agent in (IPHONE, ANDROID, DESKTOP):
        response = _get(issued.url, agent)
        assert response.status_code == 200
        assert "This pass has been voided" in response.text
        assert _buttons(response.text) == set()
        assert "data-qr-content" not in response.text


def test_a_used_up_ticket_says_so_and_offers_no_buttons(stack: Stack) -> None:
    """A single-use ticket scanned at the door (its wallet copy marked used) is not offered for
    adding again: the page says it was used, as for a voided one."""
    issued = _issue(stack)
    with stack.client(headers=issued.account.headers()) as client:
        scanned = client.post("/v1/scans", json={"pass_id": issued.pass_["id"]})
        assert scanned.json()["result"] == "accepted", scanned.text
    for agent in (IPHONE, ANDROID, DESKTOP):
        response = _get(issued.url, agent)
        assert response.status_code == 200
        assert "This pass has been used" in response.text
        assert _buttons(response.text) == set()
        assert "data-qr-content" not in response.text


def test_each_get_records_url_viewed_but_head_and_bots_do_not(stack: Stack) -> None:
    issued = _issue(stack)
    head = _get(issued.url, IPHONE, method="HEAD")
    assert head.status_code == 200
    assert head.content == b""
    _assert_page_headers(head)
    for bot in (GOOGLEBOT, SLACKBOT):
        response = _get(issued.url, bot)
        assert response.status_code == 200
        assert "Acme Live" in response.text
    for agent in (IPHONE, DESKTOP, ANDROID):
        assert _get(issued.url, agent).status_code == 200

    viewed = _wait_events(stack, issued, "url_viewed", 3)
    assert sorted(event["metadata"]["platform"] for event in viewed) == [
        "android",
        "desktop",
        "ios",
    ]
    # The HEAD and the bots came first; by now their events would have been recorded too.
    assert len(_events(stack, issued, "url_viewed")) == 3


def test_downloads_record_the_wallet(stack: Stack) -> None:
    issued = _issue(stack)
    pkpass = _get(issued.pass_["download_url"], IPHONE)
    assert pkpass.status_code == 200
    assert pkpass.headers["content-type"] == "application/vnd.apple.pkpass"
    assert pkpass.headers["content-disposition"] == 'attachment; filename="acme-live.pkpass"'
    assert pkpass.headers["referrer-policy"] == "no-referrer"
    assert pkpass.headers["x-content-type-options"] == "nosniff"
    # Neither a HEAD, a revalidation answered 304 nor a bot is a download.
    assert _get(issued.pass_["download_url"], IPHONE, method="HEAD").status_code == 200
    etag = pkpass.headers["etag"]
    cached = httpx2.get(
        issued.pass_["download_url"], headers={"If-None-Match": etag, "User-Agent": IPHONE}
    )
    assert cached.status_code == 304
    assert _get(issued.pass_["download_url"], GOOGLEBOT).status_code == 200

    google = _get(f"{issued.url}/google", ANDROID)
    assert google.status_code == 302
    mongo: MongoClient[dict[str, Any]]
    with MongoClient(stack.mongo_url) as mongo:
        stored = mongo[stack.database]["passes"].find_one({"_id": issued.pass_["id"]})
    assert stored is not None
    # Stored as "has a link"; the link itself is signed when asked for.
    assert stored["google_save_url"] == ""
    assert google.headers["location"].startswith("https://pay.google.com/gp/v/save/")
    assert google.headers["cache-control"] == "no-store"
    assert google.headers["referrer-policy"] == "no-referrer"
    assert _get(f"{issued.url}/google", ANDROID, method="HEAD").status_code == 302

    downloaded = _wait_events(stack, issued, "downloaded", 2)
    assert sorted(event["metadata"]["wallet"] for event in downloaded) == ["apple", "google"]
    assert len(_events(stack, issued, "downloaded")) == 2
    assert _events(stack, issued, "url_viewed") == []


def test_a_pass_fetched_over_and_over_records_at_most_its_cap_of_events(stack: Stack) -> None:
    """Anyone with a pass's URL could grow its stored events (and the account's webhooks)
    without bound, one GET each: 60 downloads in a row record at most 20 a minute (40 if a
    minute turns meanwhile), and every download is served."""
    issued = _issue(stack)
    with httpx2.Client(headers={"User-Agent": IPHONE}, timeout=30.0) as holder:
        for _ in range(60):
            assert holder.get(issued.pass_["download_url"]).status_code == 200
    _wait_events(stack, issued, "downloaded", PER_PASS_PER_MINUTE)
    # Another pass's view, recorded through the same outbox after them, marks that they are in.
    other = Issued(issued.account, issued.template, _issue_more(stack, issued))
    assert _get(other.url, IPHONE).status_code == 200
    _wait_events(stack, other, "url_viewed", 1)
    assert (
        PER_PASS_PER_MINUTE <= len(_events(stack, issued, "downloaded")) <= 2 * PER_PASS_PER_MINUTE
    )


async def _save_link_queries(stack: Stack, issued: Issued, gets: int) -> tuple[int, str]:
    """How many times the issuer was asked to sign a save link while the pass's Google
    redirect was fetched `gets` times (core NATS shows every request on the subject), and
    the last Location."""
    asked = 0

    async def count(_: Msg) -> None:
        nonlocal asked
        asked += 1

    client = await nats.connect(stack.nats_url)
    try:
        await client.subscribe("tessera.issuer.query.google_save_link", cb=count)
        await client.flush()
        location = ""
        for _ in range(gets):
            response = await asyncio.to_thread(_get, f"{issued.url}/google", ANDROID)
            assert response.status_code == 302
            location = response.headers["location"]
        await client.flush()
    finally:
        await client.drain()
    return asked, location


async def test_a_save_link_is_signed_once_a_minute_per_pass_version(stack: Stack) -> None:
    """Every GET of the public Google redirect had an issuer sign the link (an RSA signature
    over the object), so anyone with a pass URL could keep the issuers signing: a replica
    reuses a link of the same pass version for a minute; a new version is signed again."""
    replicas = len(stack.members("api"))  # they share the port: each signs its own once
    issued = _issue(stack)
    asked, _ = await _save_link_queries(stack, issued, gets=4 * replicas)
    assert 1 <= asked <= replicas
    with stack.client(headers=issued.account.headers()) as client:
        path = f"/v1/passes/{issued.pass_['id']}"
        ok(client.patch(path, json={"field_values": {"seat": "D9"}}))
    asked, _ = await _save_link_queries(stack, issued, gets=4 * replicas)
    assert 1 <= asked <= replicas  # the new version signed again, once per replica at most


def _issue_more(stack: Stack, issued: Issued) -> dict[str, Any]:
    with stack.client(headers=issued.account.headers()) as client:
        body = {"template_id": issued.template["id"], "field_values": {"seat": "D4"}}
        return ok(client.post("/v1/passes", json=body))


def test_require_download_link_hides_the_permanent_urls_and_back(stack: Stack) -> None:
    issued = _issue(stack)
    urls = (issued.url, issued.pass_["download_url"], f"{issued.url}/google")
    path = f"/v1/templates/{issued.template['id']}"
    with stack.client(headers=issued.account.headers()) as client:
        on = client.patch(path, json={"require_download_link": True})
        assert on.status_code == 200, on.text
        for url in urls:
            _assert_not_found_page(_get(url, IPHONE), issued)
        off = client.patch(path, json={"require_download_link": False})
        assert off.status_code == 200, off.text
    statuses = [_get(url, IPHONE).status_code for url in urls]
    assert statuses == [200, 200, 302]


def test_unknown_short_ids_answer_the_html_404(stack: Stack) -> None:
    for short_id in ("ZZZZZZZZZZZZZZZZ", "not-a-short-id", "x" * 200):
        for suffix in ("", "/pass.pkpass", "/google"):
            _assert_not_found_page(_get(f"{stack.base_url}/p/{short_id}{suffix}"))
    # Links cut short or mangled in an email (a %2F is decoded before routing) are links too.
    for path in ("/p/", "/p/ab%2Fcd", "/p/abc/def", "/l/pdl_x/other", "/b/", "/b/a/b"):
        _assert_not_found_page(_get(f"{stack.base_url}{path}"))


def test_the_stylesheet_is_served_and_linked(stack: Stack) -> None:
    issued = _issue(stack)
    page = _get(issued.url).text
    href = re.search(r'<link rel="stylesheet" href="([^"]+)">', page)
    assert href is not None
    assert href.group(1).startswith("/static/pages.css?v=")
    css = httpx2.get(stack.base_url + href.group(1))
    assert css.status_code == 200
    assert css.headers["content-type"].startswith("text/css")
    assert ".pass" in css.text
