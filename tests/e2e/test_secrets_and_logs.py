"""Secrets are stored hashed and never logged; request ids reach every service's logs."""

from typing import Any

import pytest
from pymongo import MongoClient
from pymongo.synchronous.database import Database

from tests.support.api import TEMPLATE_BODY, create_template
from tests.support.polling import poll
from tests.support.stack import Stack

pytestmark = pytest.mark.e2e


def test_api_keys_are_stored_hashed_and_never_logged(stack: Stack) -> None:
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        create_template(client, TEMPLATE_BODY)
        assert client.get("/v1/passes", params={"holder_email": "x@example.com"}).status_code == 200
    mongo: MongoClient[dict[str, Any]]
    with MongoClient(stack.mongo_url) as mongo:
        db: Database[dict[str, Any]] = mongo[stack.database]
        stored = list(db["api_keys"].find({"account_id": account.id}))
        dumped = repr(list(db["accounts"].find()) + stored)
    assert len(stored) == 2
    assert account.test_key not in dumped
    assert account.live_key not in dumped
    for name in ("api", "issuer", "events", "webhooks"):
        # Everything since the services started: the admin token must not be in their
        # start-up lines either.
        text = stack.log_text(name, whole=True)
        assert account.test_key not in text
        assert stack.admin_token not in text


def test_request_id_is_returned_and_logged_by_api_and_issuer(stack: Stack) -> None:
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        response = client.post(
            "/v1/templates",
            json={"name": "x", "type": "generic", "apple_style": "generic", "design": {}},
        )
    request_id = response.headers["Request-Id"]
    assert request_id.startswith("req_")
    assert response.status_code == 400  # the design lacks its required fields
    # The api logs a request once its response has gone out: wait for the line.
    poll(lambda: stack.log_text("api"), lambda text: request_id in text)

    with stack.client(headers=account.headers()) as client:
        created = client.post(
            "/v1/passes", json={"template_id": create_template(client, TEMPLATE_BODY)["id"]}
        )
    request_id = created.headers["Request-Id"]
    issuer_log = stack.log_text("issuer")
    assert request_id in issuer_log
