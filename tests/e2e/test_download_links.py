"""Download links behave like the permanent URL until expires_at, then answer 410 (spec 4.1
rules 3-6, 3.6). The api runs in this process with a clock the test moves: no real waiting."""

import io
import zipfile
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest

from tests.support.api import TEMPLATE_BODY, create_template
from tests.support.inproc_api import InProcessApi, ManualClock, running_api
from tests.support.polling import poll
from tests.support.stack import Account, Stack
from tests.support.user_agents import DESKTOP, IPHONE

pytestmark = pytest.mark.e2e


@pytest.fixture
def api(stack: Stack) -> Iterator[InProcessApi]:
    with running_api(stack, ManualClock()) as running:
        yield running


def _setup(stack: Stack, api: InProcessApi) -> tuple[Account, httpx2.Client, dict[str, Any]]:
    account = stack.new_account()
    client = httpx2.Client(base_url=api.base_url, headers=account.headers(), timeout=30)
    template = create_template(client, TEMPLATE_BODY)
    issued = client.post(
        "/v1/passes", json={"template_id": template["id"], "holder_name": "Ada Lovelace"}
    ).json()
    return account, client, issued


def _mint(client: httpx2.Client, pass_id: str, expires_in: int = 60) -> str:
    response = client.post(f"/v1/passes/{pass_id}/download-links", json={"expires_in": expires_in})
    assert response.status_code == 200, response.text
    url: str = response.json()["url"]
    return url


def _get(url: str, user_agent: str = DESKTOP) -> httpx2.Response:
    return httpx2.get(url, headers={"User-Agent": user_agent}, follow_redirects=False)


def test_a_link_behaves_like_the_permanent_url_until_it_expires(
    stack: Stack, api: InProcessApi
) -> None:
    _, client, issued = _setup(stack, api)
    link = _mint(client, issued["id"], expires_in=60)

    page = _get(link)
    assert page.status_code == 200
    assert "Ada Lovelace" in page.text
    assert f'data-qr-content="{link}"' in page.text  # the QR hands off the link, not /p/
    assert issued["url"] not in page.text
    assert page.headers["Cache-Control"] == "no-store"
    assert page.headers["Referrer-Policy"] == "no-referrer"
    assert "default-src 'none'" in page.headers["Content-Security-Policy"]
    iphone = _get(link, IPHONE)
    assert f'href="{link}/pass.pkpass"' in iphone.text
    pkpass = _get(f"{link}/pass.pkpass")
    assert pkpass.headers["content-type"] == "application/vnd.apple.pkpass"
    assert "pass.json" in zipfile.ZipFile(io.BytesIO(pkpass.content)).namelist()
    google = _get(f"{link}/google")
    assert google.status_code == 302
    assert google.headers["Location"].startswith("https://pay.google.com/gp/v/save/")

    api.clock.advance(59.999)
    assert _get(link).status_code == 200
    api.clock.advance(0.001)  # now == expires_at: the link no longer resolves
    for url in (link, f"{link}/pass.pkpass", f"{link}/google"):
        expired = _get(url)
        assert expired.status_code == 410
        assert "Ada Lovelace" not in expired.text
        assert "fresh link" in expired.text
    # The pass itself is not limited by the link (spec 4.1 rule 5).
    assert _get(issued["download_url"]).status_code == 200


def test_links_are_independent(stack: Stack, api: InProcessApi) -> None:
    _, client, issued = _setup(stack, api)
    short = _mint(client, issued["id"], expires_in=60)
    long = _mint(client, issued["id"], expires_in=3600)
    third = _mint(client, issued["id"], expires_in=600)
    assert len({short, long, third}) == 3
    assert _get(short).status_code == 200  # minting later links invalidated nothing
    api.clock.advance(61)
    assert _get(short).status_code == 410
    assert _get(long).status_code == 200
    assert _get(third).status_code == 200


def test_require_download_link_switches_both_ways(stack: Stack, api: InProcessApi) -> None:
    _, client, issued = _setup(stack, api)
    link = _mint(client, issued["id"], expires_in=3600)
    permanent = issued["url"].replace(stack.base_url, api.base_url)
    download = issued["download_url"].replace(stack.base_url, api.base_url)
    assert _get(permanent).status_code == 200
    client.patch(f"/v1/templates/{issued['template_id']}", json={"require_download_link": True})
    for url in (permanent, download, f"{permanent}/google"):
        hidden = _get(url)
        assert hidden.status_code == 404
        assert "Ada Lovelace" not in hidden.text
    assert _get(link).status_code == 200
    assert _get(f"{link}/pass.pkpass").status_code == 200
    client.patch(f"/v1/templates/{issued['template_id']}", json={"require_download_link": False})
    assert _get(permanent).status_code == 200
    assert _get(download).status_code == 200


def test_unknown_tokens_and_voided_passes(stack: Stack, api: InProcessApi) -> None:
    _, client, issued = _setup(stack, api)
    link = _mint(client, issued["id"])
    for url in (f"{api.base_url}/l/pdl_unknown", f"{api.base_url}/l/garbage", f"{link}x"):
        missing = _get(url)
        assert missing.status_code == 404
        assert "Ada Lovelace" not in missing.text
    client.delete(f"/v1/passes/{issued['id']}")
    voided = _get(link)  # a link of a voided pass shows the voided pass, with no add buttons
    assert voided.status_code == 200
    assert 'data-wallet="apple"' not in voided.text


def test_views_and_downloads_through_links_are_recorded(stack: Stack, api: InProcessApi) -> None:
    _, client, issued = _setup(stack, api)
    link = _mint(client, issued["id"])
    _get(link)
    _get(f"{link}/pass.pkpass")
    _get(f"{link}/google")

    def events() -> list[dict[str, Any]]:
        data: list[dict[str, Any]] = client.get(f"/v1/passes/{issued['id']}/events").json()["data"]
        return data

    found = poll(events, lambda got: len(got) >= 4)
    kinds = sorted((e["type"], e["metadata"].get("wallet")) for e in found)
    assert kinds == [
        ("created", None),
        ("downloaded", "apple"),
        ("downloaded", "google"),
        ("url_viewed", None),
    ]
