"""Google Wallet callbacks on the real stack, signed by a Google-like signer whose root key the
events service fetches from a local key server (TESSERA_EVENTS_GOOGLE_ROOT_KEYS_URL).

A pass is issued (development Google identity, issuer id DEV_ISSUER_ID), its class names the
events service's callback URL, and callbacks posted there record `installed` and `removed`.
A repeated nonce, an unknown eventType and extra keys answer 200 and record nothing twice
(issue 15). Expired, misaddressed, badly signed and unsigned callbacks answer 4xx and record
nothing: each test ends with a valid callback whose event must be the next one recorded.
JSON no service could store is a 400 without a traceback, and a 10 MB body is refused without
being read (issue 10 F07, F03).
"""

import base64
import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from pymongo import MongoClient

from shared.google_ids import DEV_ISSUER_ID, object_id
from tests.support.api import assert_error, create_pass, create_template, wait_for_events
from tests.support.fake_google_keys import FakeGoogleKeys, running_fake_google_keys
from tests.support.google_signer import GoogleSigner, now_ms
from tests.support.stack import Stack, new_stack, serving

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def signer() -> GoogleSigner:
    return GoogleSigner()


@pytest.fixture(scope="module")
def key_server(signer: GoogleSigner) -> Iterator[FakeGoogleKeys]:
    with running_fake_google_keys() as fake:
        fake.serve(signer.root_keys(), {"Cache-Control": "public, max-age=3600"})
        yield fake


@pytest.fixture(scope="module")
def stack(
    nats_url: str,
    mongo_url: str,
    key_server: FakeGoogleKeys,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Stack]:
    """Overrides conftest.py's stack: the events service fetches the signer's root key (the
    file option is tested in tests/events/test_google_settings.py)."""
    running = new_stack(nats_url, mongo_url, tmp_path_factory.mktemp("google-callbacks"))
    running.extra_env = {
        "TESSERA_EVENTS_GOOGLE_ROOT_KEYS_URL": key_server.url,
        "TESSERA_EVENTS_GOOGLE_ISSUER_ID": DEV_ISSUER_ID,
    }
    with serving(running):
        yield running


def _issue(stack: Stack) -> tuple[dict[str, str], str]:
    """A new account's test-mode headers and a pass issued with them."""
    headers = stack.new_account().headers("test")
    with stack.client(headers=headers) as client:
        pass_id: str = create_pass(client, create_template(client)["id"])["id"]
    return headers, pass_id


def _stored_pass(stack: Stack, pass_id: str) -> dict[str, Any]:
    mongo: MongoClient[dict[str, Any]]
    with MongoClient(stack.mongo_url) as mongo:
        stored = mongo[stack.database]["passes"].find_one({"_id": pass_id})
    assert stored is not None
    return stored


def _callback_url(stack: Stack, pass_id: str) -> str:
    """The class's callbackOptions.url, read from the pass's (fat) save link."""
    short_id = _stored_pass(stack, pass_id)["short_id"]
    # HEAD: the redirect signs the link but records no add intent.
    saved = httpx2.head(f"{stack.base_url}/p/{short_id}/google", timeout=10.0)
    token = saved.headers["location"].rsplit("/", 1)[1]
    claims = token.split(".")[1]
    payload = json.loads(base64.urlsafe_b64decode(claims + "=" * (-len(claims) % 4)))["payload"]
    (resource_class,) = payload["eventTicketClasses"]
    url: str = resource_class["callbackOptions"]["url"]
    return url


def _post(stack: Stack, pass_id: str, body: bytes) -> httpx2.Response:
    return httpx2.post(_callback_url(stack, pass_id), content=body, timeout=10.0)


def _signed(signer: GoogleSigner, pass_id: str, **overrides: Any) -> bytes:
    arguments: dict[str, Any] = {
        "recipient_id": DEV_ISSUER_ID,
        "object_id": object_id(DEV_ISSUER_ID, pass_id),
    }
    return signer.body(**(arguments | overrides))


def test_the_class_names_the_events_service(stack: Stack) -> None:
    _headers, pass_id = _issue(stack)
    wallet_url = stack.env()["TESSERA_WALLET_URL"]
    assert _callback_url(stack, pass_id) == f"{wallet_url}/google/callbacks"


def test_save_records_installed_and_del_records_removed(
    stack: Stack, signer: GoogleSigner, key_server: FakeGoogleKeys
) -> None:
    headers, pass_id = _issue(stack)
    with stack.client(headers=headers) as client:
        saved = _post(stack, pass_id, _signed(signer, pass_id, event_type="save"))
        assert saved.status_code == 200, saved.text
        events = wait_for_events(client, pass_id, ["installed", "created"])
        assert events[0]["metadata"] == {"wallet": "google"}
        removed = _post(stack, pass_id, _signed(signer, pass_id, event_type="del"))
        assert removed.status_code == 200, removed.text
        events = wait_for_events(client, pass_id, ["removed", "installed", "created"])
        assert events[0]["metadata"] == {"wallet": "google"}
    # Fetched from the key server, and cached: at most once per events process.
    assert 1 <= key_server.fetches <= len(stack.pids("events"))


def test_whatever_google_signed_is_acknowledged_and_recorded_once(
    stack: Stack, signer: GoogleSigner
) -> None:
    """Issue 15, acceptance 5: an extra key, an unknown eventType or a repeated nonce were 4xx,
    which Google never retries. Each is a 200 now, and nothing is recorded twice."""
    headers, pass_id = _issue(stack)
    saved = _signed(signer, pass_id, event_type="save")
    extra = json.loads(_signed(signer, pass_id, event_type="del", signed_key_extra={"v": "2"}))
    extra |= {"futureKey": "x"}
    extra["intermediateSigningKey"] |= {"futureKey": 1}
    nonces_before = _nonce_count(stack)
    with stack.client(headers=headers) as client:
        for name, body in {
            "save": saved,
            "the save again": saved,
            "an unknown eventType": _signed(signer, pass_id, event_type="unsave"),
            "extra keys (a del)": json.dumps(extra).encode(),
            "the del again": json.dumps(extra).encode(),
        }.items():
            response = _post(stack, pass_id, body)
            assert (response.status_code, response.json()) == (200, {"received": True}), name
        wait_for_events(client, pass_id, ["removed", "installed", "created"])
        # The next callback's event is the next one recorded: nothing else came in between.
        assert _post(stack, pass_id, _signed(signer, pass_id)).status_code == 200
        wait_for_events(client, pass_id, ["installed", "removed", "installed", "created"])
    assert _nonce_count(stack) == nonces_before + 3
    assert "eventType Tessera does not know ('unsave')" in stack.log_text("events")


def test_refused_callbacks_answer_4xx_and_record_nothing(
    stack: Stack, signer: GoogleSigner
) -> None:
    headers, pass_id = _issue(stack)
    impostor = GoogleSigner()
    other_issuer = "3388000000099999999"
    saved = _signed(signer, pass_id, event_type="save")
    assert _post(stack, pass_id, saved).status_code == 200
    message = json.loads(saved)["signedMessage"]
    refusals = {
        "expired message": (
            _signed(signer, pass_id, exp_ms=now_ms() - 1),
            401,
            "authentication_error",
        ),
        "wrong issuer id": (
            _signed(
                signer,
                pass_id,
                recipient_id=other_issuer,
                object_id=object_id(other_issuer, pass_id),
            ),
            401,
            "authentication_error",
        ),
        "bad intermediate signature": (
            _signed(signer, pass_id, intermediate_signer=impostor.root),
            401,
            "authentication_error",
        ),
        "unknown root": (_signed(impostor, pass_id), 401, "authentication_error"),
        "unsigned": (message.encode(), 400, "invalid_request_error"),
        "empty": (b"", 400, "invalid_request_error"),
    }
    nonces_before = _nonce_count(stack)
    with stack.client(headers=headers) as client:
        for name, (body, status, error_type) in refusals.items():
            error = assert_error(_post(stack, pass_id, body), status, error_type)
            assert error["code"].startswith("google_callback"), (name, error)
        assert _nonce_count(stack) == nonces_before
        # The next recorded event is this del: none of the refused ones got in before it.
        assert _post(stack, pass_id, _signed(signer, pass_id, event_type="del")).status_code == 200
        wait_for_events(client, pass_id, ["removed", "installed", "created"])


def test_a_callback_for_an_unknown_pass_is_404(stack: Stack, signer: GoogleSigner) -> None:
    _headers, pass_id = _issue(stack)
    response = _post(stack, pass_id, _signed(signer, "pass_0Mx3ZyXwVuTsRqPoNmLkJi"))
    assert_error(response, 404, "not_found_error")


def test_json_no_service_could_store_is_400_without_a_traceback(
    stack: Stack, signer: GoogleSigner
) -> None:
    """Issue 10 F07: these were 500s with a traceback each, which Google retries."""
    _headers, pass_id = _issue(stack)
    valid = json.loads(_signed(signer, pass_id))
    surrogate_key = valid | {
        "intermediateSigningKey": valid["intermediateSigningKey"] | {"signedKey": "\ud800"}
    }
    bodies = {
        "deep": b"[" * 50_000,
        "lone surrogate in signedKey": json.dumps(surrogate_key).encode(),
        "65-bit integer": json.dumps(valid | {"signature": 2**64}).encode(),
    }
    nonces_before = _nonce_count(stack)
    for name, body in bodies.items():
        error = assert_error(_post(stack, pass_id, body), 400, "invalid_request_error")
        assert error["code"] == "google_callback_malformed", (name, error)
    assert _nonce_count(stack) == nonces_before
    assert "Traceback" not in stack.log_text("events")


def _nonce_count(stack: Stack) -> int:
    mongo: MongoClient[dict[str, Any]]
    with MongoClient(stack.mongo_url) as mongo:
        return mongo[stack.database]["google_callback_nonces"].count_documents({})


TEN_MB = 10 * 1024 * 1024
# What a refused body may cost a process: a few buffers of 64 KiB, nowhere near the body.
MEMORY_SLACK_KB = 4 * 1024


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
@pytest.mark.parametrize("path", ["/google/callbacks", "/v1/log"])
def test_a_10_mb_body_is_refused_without_being_read(
    stack: Stack, path: str, declared: bool
) -> None:
    """Issue 10 F03: the body is streamed, with or without Content-Length, and refused with
    413 while no events process grows by more than a few MB (peak resident memory)."""
    url = stack.env()["TESSERA_WALLET_URL"] + path
    headers = {"Content-Length": str(TEN_MB)} if declared else {}
    httpx2.post(url, content=b"{}", timeout=10.0)  # the route's first-use allocations
    pids = stack.pids("events")
    assert pids
    before = {pid: _reset_peak_memory_kb(pid) for pid in pids}
    response = httpx2.post(url, content=_stream(TEN_MB), headers=headers, timeout=60.0)
    if path == "/google/callbacks":
        assert_error(response, 413, "invalid_request_error")
    assert response.status_code == 413
    growth = {pid: _status_kb(pid, "VmHWM") - before[pid] for pid in pids}
    assert max(growth.values()) < MEMORY_SLACK_KB, growth


def _stream(total: int, chunk: int = 64 * 1024) -> Iterator[bytes]:
    block = b"[" * chunk
    for _ in range(total // chunk):
        yield block


def _status_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def _reset_peak_memory_kb(pid: int) -> int:
    """Reset the process's peak resident memory (VmHWM) to its current VmRSS, which is
    returned: after the request, VmHWM minus this is the most the request made it grow."""
    with contextlib.suppress(OSError), open(f"/proc/{pid}/clear_refs", "w") as clear_refs:
        clear_refs.write("5")
    return _status_kb(pid, "VmRSS")
