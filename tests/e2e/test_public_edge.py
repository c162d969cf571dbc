"""Issue 10, hardening of what faces the Internet: redirects never name a host the client
chose, and wrong admin tokens are rate-limited per client address."""

import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from services.api.limits import ADMIN_FAILURE_WINDOW_SECONDS
from tests.support.api import assert_error
from tests.support.stack import ADMIN_GUESSES, Stack

pytestmark = pytest.mark.e2e
BODY = {"name": "guess", "plan": "free"}


@pytest.mark.parametrize(
    ("path", "location"),
    [("/v1/passes/", "/v1/passes"), ("/v1/templates/?limit=5", "/v1/templates?limit=5")],
)
def test_trailing_slash_redirects_are_relative(stack: Stack, path: str, location: str) -> None:
    """The Location used to be built from the Host header: http://evil.example/v1/passes."""
    with stack.client() as client:
        response = client.get(path, headers={"Host": "evil.example"}, follow_redirects=False)
    assert response.status_code == 307
    assert response.headers["location"] == location


def _window() -> int:
    """The admin guesses' counting window now (services/api/limits.py: fixed, epoch-aligned)."""
    return int(time.time() // ADMIN_FAILURE_WINDOW_SECONDS)


def test_wrong_admin_tokens_are_refused_outright_after_a_few(stack: Stack) -> None:
    """Counted per client address across replicas: this test's address is its own (uvicorn
    takes X-Forwarded-For from loopback, its default trusted proxy)."""
    with stack.client() as client:
        # The guesses must fall in one window: if one ended while they were sent, the count
        # started again, and the guessing starts again from another address.
        for address in ("203.0.113.7", "203.0.113.17"):
            guesser = {"X-Forwarded-For": address}
            wrong = {"Authorization": "Bearer " + "w" * 43, **guesser}
            began = _window()
            for _ in range(ADMIN_GUESSES):
                response = client.post("/admin/v1/accounts", json=BODY, headers=wrong)
                assert_error(response, 401, "authentication_error")
            refused = client.post("/admin/v1/accounts", json=BODY, headers=wrong)
            if _window() == began:
                break
        assert_error(refused, 429, "rate_limit_error", code="admin_token_rate_limited")
        assert int(refused.headers["Retry-After"]) > 0
        # The right token from the same address waits too: a guess must not be confirmed.
        right = {**stack.admin_headers(), **guesser}
        assert client.post("/admin/v1/accounts", json=BODY, headers=right).status_code == 429
        # Other addresses are not affected.
        fine = client.post("/admin/v1/accounts", json=BODY, headers=stack.admin_headers())
        assert fine.status_code == 201


def _guess_at_once(stack: Stack, addresses: list[str]) -> list[int]:
    """One wrong admin token from each address, all in flight together; the statuses."""

    def guess(address: str) -> int:
        wrong = {"Authorization": "Bearer " + "w" * 43, "X-Forwarded-For": address}
        with stack.client() as client:
            return client.get("/admin/v1/accounts", headers=wrong).status_code

    with ThreadPoolExecutor(max_workers=len(addresses)) as pool:
        return list(pool.map(guess, addresses))


def test_guesses_sent_at_once_or_from_one_ipv6_network_share_the_limit(stack: Stack) -> None:
    """Each attempt is counted before its token is judged: concurrent guesses could all read
    a count under the limit. An IPv6 client counts by its /64, whose addresses it can change
    at will. The right token costs nothing of the budget."""
    for attempt in range(3):
        began = _window()
        together = _guess_at_once(stack, [f"203.0.113.{40 + attempt}"] * (3 * ADMIN_GUESSES))
        network = [f"2001:db8:0:{attempt}::{n + 1:x}" for n in range(2 * ADMIN_GUESSES)]
        spread = _guess_at_once(stack, network)
        if _window() == began:
            break
    assert together.count(401) == ADMIN_GUESSES
    assert together.count(429) == 2 * ADMIN_GUESSES
    assert spread.count(401) == ADMIN_GUESSES
    operator = {**stack.admin_headers(), "X-Forwarded-For": "203.0.113.99"}
    with stack.client() as client:
        answers = [
            client.get("/admin/v1/accounts", headers=operator).status_code
            for _ in range(2 * ADMIN_GUESSES)
        ]
    assert set(answers) == {200}


def test_the_operator_api_has_its_own_document_behind_the_token(stack: Stack) -> None:
    with stack.client() as client:
        public = client.get("/openapi.json").json()["paths"]
        assert not any(path.startswith("/admin") for path in public)
        hidden = client.get("/admin/v1/openapi.json", headers={"X-Forwarded-For": "203.0.113.8"})
        assert hidden.status_code == 401
        operator = client.get("/admin/v1/openapi.json", headers=stack.admin_headers())
    assert operator.status_code == 200
    paths = operator.json()["paths"]
    assert "/admin/v1/accounts" in paths
    assert not any(path.startswith("/v1/") for path in paths)
