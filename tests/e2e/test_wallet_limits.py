"""The Apple web service's limits on the whole stack (issue 10 F05), set low for the test: at most
3 devices per pass, and per hour 12 requests per pass and 30 per client address.

A pass file in the wrong hands registers a few devices, not hundreds; the rest are refused with
403 and record nothing. Past a rate limit every request is a bare 429 with Retry-After, for the
pass from any address, or for the address whatever it asks. Client addresses come from
X-Forwarded-For, which uvicorn trusts from loopback (its default FORWARDED_ALLOW_IPS), as it
would from a reverse proxy in production.
"""

import secrets
from collections.abc import Callable, Iterator

import httpx2
import pytest

from tests.support.api import wait_for_events
from tests.support.apple_wallet import PASS_TYPE, issue_and_download
from tests.support.emulated_iphone import EmulatedIPhone, InstalledPass
from tests.support.stack import Stack, new_stack, serving

pytestmark = pytest.mark.e2e

MAX_DEVICES = 3
PER_PASS = 12
PER_ADDRESS = 30
WINDOW_SECONDS = 3600  # long, so that no window ends while a test counts


@pytest.fixture(scope="module")
def stack(
    nats_url: str, mongo_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    """Overrides conftest.py's stack: the events service with low limits."""
    running = new_stack(nats_url, mongo_url, tmp_path_factory.mktemp("wallet-limits"))
    running.extra_env = {
        "TESSERA_EVENTS_MAX_DEVICES_PER_PASS": str(MAX_DEVICES),
        "TESSERA_EVENTS_WALLET_RATE_WINDOW_SECONDS": str(WINDOW_SECONDS),
        "TESSERA_EVENTS_WALLET_RATE_LIMIT_PER_PASS": str(PER_PASS),
        "TESSERA_EVENTS_WALLET_RATE_LIMIT_PER_ADDRESS": str(PER_ADDRESS),
    }
    with serving(running):
        yield running


@pytest.fixture
def api(stack: Stack) -> Iterator[httpx2.Client]:
    with stack.client(headers=stack.new_account().headers()) as client:
        yield client


@pytest.fixture(scope="module")
def wallet(stack: Stack) -> Iterator[httpx2.Client]:
    with httpx2.Client(base_url=stack.env()["TESSERA_WALLET_URL"], timeout=30) as client:
        yield client


def test_a_pass_registers_at_most_its_cap_of_devices(api: httpx2.Client) -> None:
    pass_, pkpass, last_modified = issue_and_download(api)
    phones = [EmulatedIPhone() for _ in range(MAX_DEVICES + 2)]
    try:
        assert [phone.install(pkpass, last_modified) for phone in phones] == [201] * MAX_DEVICES + [
            403,
            403,
        ]
        assert phones[0].install(pkpass, last_modified) == 200  # a registered device renews
        serial = InstalledPass(pkpass, last_modified).serial_number
        assert phones[1].remove(serial) == 200
        assert phones[MAX_DEVICES].install(pkpass, last_modified) == 201
    finally:
        for phone in phones:
            phone.close()
    # The refused registrations recorded nothing: after the one removal, one more installed.
    expected = ["installed", "removed"] + ["installed"] * MAX_DEVICES + ["downloaded", "created"]
    wait_for_events(api, pass_["id"], expected)


def test_a_pass_past_its_rate_limit_is_429_from_any_address(
    api: httpx2.Client, wallet: httpx2.Client
) -> None:
    _, pkpass, _ = issue_and_download(api)
    installed = InstalledPass(pkpass, None)
    path = f"/v1/passes/{PASS_TYPE}/{installed.serial_number}"
    address = _address()
    holder = installed.authorization | _from(address)
    refused = _until_refused(lambda: wallet.get(path, headers=holder), PER_PASS)
    _assert_rate_limited(refused)
    assert wallet.get(path, headers=installed.authorization | _from(_address())).status_code == 429
    registration = f"/v1/devices/{secrets.token_hex(16)}/registrations/{PASS_TYPE}"
    other = wallet.post(
        f"{registration}/{installed.serial_number}",
        json={"pushToken": secrets.token_hex(32)},
        headers=installed.authorization | _from(_address()),
    )
    assert other.status_code == 429
    # Another pass, from the same address, is not limited by this one.
    _, another_pkpass, _ = issue_and_download(api)
    other_pass = InstalledPass(another_pkpass, None)
    fresh = wallet.get(
        f"/v1/passes/{PASS_TYPE}/{other_pass.serial_number}",
        headers=other_pass.authorization | _from(address),
    )
    assert fresh.status_code == 200


def test_an_address_past_its_rate_limit_is_429_whatever_it_asks(wallet: httpx2.Client) -> None:
    flooding = _from(_address())
    listing = f"/v1/devices/{secrets.token_hex(16)}/registrations/{PASS_TYPE}"
    refused = _until_refused(lambda: wallet.get(listing, headers=flooding), PER_ADDRESS)
    _assert_rate_limited(refused)
    assert wallet.post("/v1/log", json={"logs": ["x"]}, headers=flooding).status_code == 429
    assert wallet.get(f"/v1/passes/{PASS_TYPE}/some-serial", headers=flooding).status_code == 429
    # Other clients are not affected.
    assert wallet.get(listing, headers=_from(_address())).status_code == 204
    logged = wallet.post("/v1/log", json={"logs": ["x"]}, headers=_from(_address()))
    assert logged.status_code == 200


def _address() -> str:
    """A client address of its own (documentation prefix, random enough never to repeat)."""
    parts = [secrets.token_hex(2) for _ in range(4)]
    return "2001:db8::" + ":".join(parts)


def _from(address: str) -> dict[str, str]:
    return {"X-Forwarded-For": address}


def _until_refused(send: Callable[[], httpx2.Response], limit: int) -> httpx2.Response:
    """Send until the first 429, which comes after `limit` answers (up to twice that if a
    window ended meanwhile, which a one-hour window makes all but impossible)."""
    statuses: list[int] = []
    for _ in range(2 * limit + 1):
        response = send()
        if response.status_code == 429:
            assert limit <= len(statuses) <= 2 * limit, statuses
            return response
        statuses.append(response.status_code)
    raise AssertionError(f"never refused after {len(statuses)} requests: {statuses}")


def _assert_rate_limited(response: httpx2.Response) -> None:
    assert response.status_code == 429
    assert response.content == b""
    assert 1 <= int(response.headers["retry-after"]) <= WINDOW_SECONDS
