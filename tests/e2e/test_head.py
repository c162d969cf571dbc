"""HEAD is answered wherever GET is (services/api/head.py): same status and headers, no body."""

from collections.abc import Iterator

import httpx2
import pytest

from tests.support.api import create_pass, create_template
from tests.support.stack import Stack

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def client(stack: Stack) -> Iterator[httpx2.Client]:
    account = stack.new_account()
    with stack.client(headers=account.headers("test")) as client:
        yield client


def test_head_of_an_api_read_is_its_get_without_the_body(client: httpx2.Client) -> None:
    template_id = create_template(client)["id"]
    pass_id = create_pass(client, template_id)["id"]
    for path in (f"/v1/passes/{pass_id}", "/v1/passes?limit=1", f"/v1/templates/{template_id}"):
        got, head = client.get(path), client.head(path)
        assert (head.status_code, got.status_code) == (200, 200), path
        assert head.content == b""
        assert head.headers["content-length"] == got.headers["content-length"] != "0"
        assert head.headers["content-type"] == got.headers["content-type"]
        assert "request-id" in head.headers


def test_head_answers_the_errors_get_would(stack: Stack, client: httpx2.Client) -> None:
    missing = client.head("/v1/passes/pass_0000000000000000000000")
    assert (missing.status_code, missing.content) == (404, b"")
    with stack.client() as anonymous:
        assert anonymous.head("/v1/passes").status_code == 401
    assert stack.client().head("/healthz").status_code == 200


def test_head_is_allowed_only_where_get_is(client: httpx2.Client) -> None:
    refused = client.head("/v1/webhooks/we_0000000000000000000000/rotate_secret")  # POST only
    assert refused.status_code == 405
    assert refused.headers["allow"] == "POST"
    wrong = client.put("/v1/passes")
    assert wrong.status_code == 405
    assert wrong.headers["allow"] == "GET, HEAD, POST"
