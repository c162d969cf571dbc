"""Every status code of Apple's pass web service on the events service (issue 6, acceptance 2).

Registration 201/200/401 (and 400, 413; a voided pass registers too), unregistration 200/401,
the serial listing 200/204, the latest pass 200/304/401 with a Last-Modified never later than
its Date, the device log 200 (visible to operators) and 400/413.
Every failure to name a pass with its token is the same bare 401, whether the serial exists
or not. Bodies no service could store (issue 10 F07, F12) are a 400 with no traceback logged.
"""

import io
import json
import secrets
import zipfile
from collections.abc import Iterator
from email.utils import format_datetime, parsedate_to_datetime
from typing import Any

import httpx2
import pytest

from tests.support.api import list_page, ok
from tests.support.apple_wallet import PASS_TYPE, event_where, issue_and_download
from tests.support.polling import poll
from tests.support.stack import Stack

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def wallet(stack: Stack) -> Iterator[httpx2.Client]:
    with httpx2.Client(base_url=f"http://127.0.0.1:{stack.api_port + 1}", timeout=30) as client:
        yield client


@pytest.fixture
def api(stack: Stack) -> Iterator[httpx2.Client]:
    with stack.client(headers=stack.new_account().headers()) as client:
        yield client


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"ApplePass {token}"}


def registration(device: str, serial: str, pass_type: str = PASS_TYPE) -> str:
    return f"/v1/devices/{device}/registrations/{pass_type}/{serial}"


def new_pass(api: httpx2.Client) -> dict[str, Any]:
    pass_, _, _ = issue_and_download(api)
    record: dict[str, Any] = pass_
    return record


def token_of(pass_: dict[str, Any]) -> str:
    """The pass's authenticationToken, read from the pass.json a holder downloads."""
    pkpass = httpx2.get(pass_["download_url"], timeout=30).content
    with zipfile.ZipFile(io.BytesIO(pkpass)) as archive:
        token: str = json.loads(archive.read("pass.json"))["authenticationToken"]
    return token


def push_body() -> dict[str, str]:
    return {"pushToken": secrets.token_hex(32)}


def test_registration_answers_201_200_and_401_without_telling_serials_apart(
    stack: Stack, api: httpx2.Client, wallet: httpx2.Client
) -> None:
    pass_ = new_pass(api)
    token, serial, device = token_of(pass_), pass_["serial_number"], secrets.token_hex(16)
    path = registration(device, serial)

    refusals = [
        wallet.post(path, json=push_body(), headers=auth("wrong" + token)),
        wallet.post(path, json=push_body()),
        wallet.post(path, json=push_body(), headers={"Authorization": f"Bearer {token}"}),
        wallet.post(registration(device, "no-such-serial"), json=push_body(), headers=auth(token)),
        wallet.post(
            registration(device, serial, "pass.other"), json=push_body(), headers=auth(token)
        ),
    ]
    assert {(r.status_code, r.content) for r in refusals} == {(401, b"")}

    assert (
        wallet.post(path, json={"pushToken": "not a token!"}, headers=auth(token)).status_code
        == 400
    )
    assert wallet.post(path, content=b"{", headers=auth(token)).status_code == 400
    huge = {"pushToken": "a" * 8000}
    assert wallet.post(path, json=huge, headers=auth(token)).status_code == 413

    assert wallet.post(path, json=push_body(), headers=auth(token)).status_code == 201
    assert wallet.post(path, json=push_body(), headers=auth(token)).status_code == 200
    event_where(api, pass_["id"], "installed")
    types = [event["type"] for event in list_page(api, f"/v1/passes/{pass_['id']}/events")["data"]]
    assert types.count("installed") == 1


def test_a_voided_pass_registers_with_the_codes_apple_documents(
    stack: Stack, api: httpx2.Client, wallet: httpx2.Client
) -> None:
    """Issue 15: it was a 410, which Apple's reference does not list for this call."""
    pass_ = new_pass(api)
    token = token_of(pass_)
    ok(api.delete(f"/v1/passes/{pass_['id']}"))
    device = secrets.token_hex(16)
    path = registration(device, pass_["serial_number"])
    assert wallet.post(path, json=push_body(), headers=auth(token)).status_code == 201
    assert wallet.post(path, json=push_body(), headers=auth(token)).status_code == 200
    assert wallet.post(path, json=push_body(), headers=auth("x" + token)).status_code == 401
    # The device is told about the pass, and so fetches its voided version.
    listing = wallet.get(f"/v1/devices/{device}/registrations/{PASS_TYPE}")
    assert listing.json()["serialNumbers"] == [pass_["serial_number"]]


def test_unregistration_answers_200_and_401(
    stack: Stack, api: httpx2.Client, wallet: httpx2.Client
) -> None:
    pass_ = new_pass(api)
    token, device = token_of(pass_), secrets.token_hex(16)
    path = registration(device, pass_["serial_number"])
    assert wallet.post(path, json=push_body(), headers=auth(token)).status_code == 201

    assert wallet.delete(path, headers=auth("wrong")).status_code == 401
    assert (
        wallet.delete(registration(device, "no-such-serial"), headers=auth(token)).status_code
        == 401
    )
    assert wallet.delete(path, headers=auth(token)).status_code == 200
    removed = event_where(api, pass_["id"], "removed")
    assert removed["metadata"]["wallet"] == "apple"
    # Unregistering again is still 200, and records nothing more.
    assert wallet.delete(path, headers=auth(token)).status_code == 200
    assert wallet.get(f"/v1/devices/{device}/registrations/{PASS_TYPE}").status_code == 204
    types = [event["type"] for event in list_page(api, f"/v1/passes/{pass_['id']}/events")["data"]]
    assert types.count("removed") == 1


def test_the_serial_listing_answers_200_with_a_tag_or_204(
    stack: Stack, api: httpx2.Client, wallet: httpx2.Client
) -> None:
    device = secrets.token_hex(16)
    listing = f"/v1/devices/{device}/registrations/{PASS_TYPE}"
    assert wallet.get(listing).status_code == 204  # an unknown device
    first, second = new_pass(api), new_pass(api)
    for pass_ in (first, second):
        path = registration(device, pass_["serial_number"])
        assert wallet.post(path, json=push_body(), headers=auth(token_of(pass_))).status_code == 201

    everything = wallet.get(listing)
    assert everything.status_code == 200
    assert everything.headers["content-type"] == "application/json"
    body = everything.json()
    assert set(body) == {"serialNumbers", "lastUpdated"}
    assert sorted(body["serialNumbers"]) == sorted(
        [first["serial_number"], second["serial_number"]]
    )
    tag = body["lastUpdated"]
    assert wallet.get(listing, params={"passesUpdatedSince": tag}).status_code == 204

    ok(api.patch(f"/v1/passes/{second['id']}", json={"field_values": {"seat": "3"}}))
    changed = wallet.get(listing, params={"passesUpdatedSince": tag})
    assert changed.status_code == 200
    assert changed.json()["serialNumbers"] == [second["serial_number"]]
    assert changed.json()["lastUpdated"] != tag
    newer = changed.json()["lastUpdated"]
    assert wallet.get(listing, params={"passesUpdatedSince": newer}).status_code == 204
    # A tag that is not one of ours lists everything, as no tag does.
    assert (
        len(wallet.get(listing, params={"passesUpdatedSince": "junk"}).json()["serialNumbers"]) == 2
    )
    # Another pass type of the same device is another listing.
    assert wallet.get(f"/v1/devices/{device}/registrations/pass.other").status_code == 204


def test_the_latest_pass_answers_200_304_and_401(
    stack: Stack, api: httpx2.Client, wallet: httpx2.Client
) -> None:
    pass_ = new_pass(api)
    token, serial = token_of(pass_), pass_["serial_number"]
    path = f"/v1/passes/{PASS_TYPE}/{serial}"

    refusals = [
        wallet.get(path),
        wallet.get(path, headers=auth("wrong")),
        wallet.get(f"/v1/passes/{PASS_TYPE}/no-such-serial", headers=auth(token)),
        wallet.get(f"/v1/passes/pass.other/{serial}", headers=auth(token)),
    ]
    assert {(r.status_code, r.content) for r in refusals} == {(401, b"")}

    first = wallet.get(path, headers=auth(token))
    assert first.status_code == 200
    assert first.headers["content-type"] == "application/vnd.apple.pkpass"
    assert first.content.startswith(b"PK")
    assert_dated(first)

    def revalidated() -> httpx2.Response | None:
        # The stored stamp is rounded up to a whole second, so for up to a second the header
        # is the (earlier) Date instead, which revalidates to a 200; then to a 304.
        got = assert_dated(wallet.get(path, headers=auth(token)))
        since = {"If-Modified-Since": got.headers["last-modified"]}
        again = wallet.get(path, headers=auth(token) | since)
        return again if again.status_code == 304 else None

    unchanged = poll(revalidated, timeout=5.0, message="a 304 once the clock passed the stamp")
    assert unchanged.content == b""
    stamp = assert_dated(unchanged).headers["last-modified"]
    earlier = format_datetime(parsedate_to_datetime(stamp).replace(year=2020), usegmt=True)
    assert wallet.get(path, headers=auth(token) | {"If-Modified-Since": earlier}).status_code == 200

    # Two updates within one second: stored a second apart, so their stamps run ahead of the
    # clock; each is still served to a device holding the one before, and never dated later
    # than the response (issue 15).
    for seat in ("7", "8"):
        ok(api.patch(f"/v1/passes/{pass_['id']}", json={"field_values": {"seat": seat}}))
        newer = assert_dated(wallet.get(path, headers=auth(token) | {"If-Modified-Since": stamp}))
        assert newer.status_code == 200
        assert parsedate_to_datetime(newer.headers["last-modified"]) >= parsedate_to_datetime(stamp)
        stamp = newer.headers["last-modified"]
    event_where(api, pass_["id"], "updated", stage="delivered", version=3)
    # Version 1 was downloaded too, but only updated versions count as deliveries.
    events = list_page(api, f"/v1/passes/{pass_['id']}/events")["data"]
    delivered = [e for e in events if e["metadata"].get("stage") == "delivered"]
    assert sorted(e["metadata"]["version"] for e in delivered) == [2, 3]


def assert_dated(response: httpx2.Response) -> httpx2.Response:
    """One Date, and a Last-Modified not later than it (HTTP forbids that)."""
    (date,) = response.headers.get_list("date")
    modified = parsedate_to_datetime(response.headers["last-modified"])
    assert modified <= parsedate_to_datetime(date), (modified, date)
    return response


def test_device_logs_are_kept_for_operators(stack: Stack, wallet: httpx2.Client) -> None:
    marker = secrets.token_hex(8)
    logs = [f"{marker} Web service error for {PASS_TYPE}", "x" * 5000]
    assert wallet.post("/v1/log", json={"logs": logs}).status_code == 200
    assert wallet.post("/v1/log", content=b"not json").status_code == 400
    assert wallet.post("/v1/log", json={"logs": "one string"}).status_code == 400
    assert wallet.post("/v1/log", json={"logs": ["y" * 70_000]}).status_code == 413

    with stack.client(headers=stack.admin_headers()) as admin:
        page = poll(
            lambda: ok(admin.get("/admin/v1/device_logs", params={"limit": 10})),
            lambda body: any(marker in entry["message"] for entry in body["data"]),
        )
    with stack.client() as anonymous:
        assert anonymous.get("/admin/v1/device_logs").status_code == 401
    newest, mine = page["data"][0], page["data"][1]
    assert newest["object"] == "device_log"
    assert len(newest["message"]) == 2000
    assert mine["message"] == logs[0]
    assert newest["id"].startswith("dlog_")


def test_bodies_no_service_could_store_are_400_without_a_traceback(
    stack: Stack, api: httpx2.Client, wallet: httpx2.Client
) -> None:
    """Issue 10 F07 and F12: each of these was a 500 with a traceback, or accepted."""
    pass_ = new_pass(api)
    path = registration(secrets.token_hex(16), pass_["serial_number"])
    token, holder = secrets.token_hex(32), auth(token_of(pass_))
    registrations = {
        "deep": b'{"pushToken": ' + b"[" * 2000 + b"]" * 2000 + b"}",
        "lone surrogate": b'{"pushToken": "\\ud800' + token.encode() + b'"}',
        "trailing newline": json.dumps({"pushToken": token + "\n"}).encode(),
    }
    for name, body in registrations.items():
        response = wallet.post(path, content=body, headers=holder)
        assert (response.status_code, response.content) == (400, b""), name
    logs = {
        "deep": b'{"logs": ' + b"[" * 5000 + b"]" * 5000 + b"}",
        "lone surrogate": b'{"logs": ["\\ud800"]}',
        "lone surrogate in a key": b'{"logs": ["x"], "\\udfff": 1}',
        "huge integer": b'{"logs": ["x"], "n": 123456789012345678901234567890}',
    }
    for name, body in logs.items():
        assert wallet.post("/v1/log", content=body).status_code == 400, name
    # The device can still register, and nothing above left a traceback in any events log.
    assert wallet.post(path, json={"pushToken": token}, headers=holder).status_code == 201
    assert "Traceback" not in stack.log_text("events")
