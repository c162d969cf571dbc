"""Google Wallet callbacks on the real stack, signed by a Google-like signer whose root key the
events service is configured to trust.

A pass is issued (development Google identity, issuer id DEV_ISSUER_ID), its class names the
events service's callback URL, and callbacks posted there record `installed` and `removed`.
Replayed, expired, misaddressed, badly signed and unsigned callbacks answer 4xx and record
nothing: each test ends with a valid callback whose event must be the next one recorded.
"""

import base64
import json
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from pymongo import MongoClient

from services.issuer.google.identity import DEV_ISSUER_ID
from services.issuer.google.objects import object_id
from tests.support.api import assert_error, create_pass, create_template, wait_for_events
from tests.support.google_signer import GoogleSigner, now_ms
from tests.support.stack import Stack, new_stack, serving

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def signer() -> GoogleSigner:
    return GoogleSigner()


@pytest.fixture(scope="module")
def stack(
    nats_url: str, mongo_url: str, signer: GoogleSigner, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    """Overrides conftest.py's stack: the events service trusts the signer's root key."""
    running = new_stack(nats_url, mongo_url, tmp_path_factory.mktemp("google-callbacks"))
    roots = signer.write_root_keys(running.work_dir / "google-root-keys.json")
    running.extra_env = {
        "TESSERA_EVENTS_GOOGLE_ROOT_KEYS_PATH": str(roots),
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
    token = _stored_pass(stack, pass_id)["google_save_url"].rsplit("/", 1)[1]
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


def test_save_records_installed_and_del_records_removed(stack: Stack, signer: GoogleSigner) -> None:
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


def test_refused_callbacks_answer_4xx_and_record_nothing(
    stack: Stack, signer: GoogleSigner
) -> None:
    headers, pass_id = _issue(stack)
    impostor = GoogleSigner()
    other_issuer = "3388000000099999999"
    replayed = _signed(signer, pass_id, event_type="save")
    assert _post(stack, pass_id, replayed).status_code == 200
    message = json.loads(replayed)["signedMessage"]
    refusals = {
        "replayed nonce": (replayed, 409, "invalid_request_error"),
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


def _nonce_count(stack: Stack) -> int:
    mongo: MongoClient[dict[str, Any]]
    with MongoClient(stack.mongo_url) as mongo:
        return mongo[stack.database]["google_callback_nonces"].count_documents({})
