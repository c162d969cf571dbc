"""Live mode with one wallet (issue 16): production Apple credentials and no Google ones issue
live passes, with no Google Wallet link, instead of refusing them all."""

from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from pymongo import MongoClient

from shared.apple_identity import ensure_dev_identity
from tests.support.api import create_pass, create_template
from tests.support.pkpass_check import verified_pass_json
from tests.support.stack import Stack, new_stack, serving

pytestmark = pytest.mark.e2e
PASS_TYPE = "pass.com.example.appleonly"


@pytest.fixture(scope="module")
def stack(
    nats_url: str, mongo_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    """Overrides the development stack of conftest.py: Apple configured, Google not."""
    running = new_stack(nats_url, mongo_url, tmp_path_factory.mktemp("apple-only-stack"))
    apple = running.work_dir / "apple"
    ensure_dev_identity(apple, pass_type_identifier=PASS_TYPE)
    running.extra_env = {
        "TESSERA_PASS_TYPE_IDENTIFIER": PASS_TYPE,
        "TESSERA_APPLE_CERTIFICATE_PATH": str(apple / "signer.pem"),
        "TESSERA_APPLE_PRIVATE_KEY_PATH": str(apple / "signer-key.pem"),
        "TESSERA_APPLE_WWDR_CERTIFICATE_PATH": str(apple / "wwdr.pem"),
    }
    with serving(running):
        yield running


def test_apple_only_credentials_issue_live_passes_without_a_google_link(
    stack: Stack, tmp_path_factory: pytest.TempPathFactory
) -> None:
    account = stack.new_account("paid")
    with stack.client(headers=account.headers("live")) as live:
        template = create_template(live)
        issued = create_pass(live, template["id"])
        assert (issued["mode"], issued["google_status"]) == ("live", None)
        assert issued["google_save_url"] is None
        download = live.get(issued["download_url"])
        assert download.status_code == 200
        root_ca = stack.work_dir / "apple" / "root-ca.pem"
        pass_json = verified_pass_json(download.content, root_ca, tmp_path_factory.mktemp("p"))
        assert pass_json["passTypeIdentifier"] == PASS_TYPE
        page = live.get(issued["url"])
        assert page.status_code == 200
        assert "Save to Google Wallet" not in page.text
        assert live.get(f"{issued['url']}/google", follow_redirects=False).status_code == 404
        # Test mode keeps its development Google link.
        with stack.client(headers=account.headers("test")) as test:
            test_pass = create_pass(test, create_template(test)["id"])
            assert "Save to Google Wallet" in ok_text(test.get(test_pass["url"]))


def test_a_pass_issued_while_google_was_configured_gets_the_404_page_for_google(
    stack: Stack,
) -> None:
    """The operator removed the Google credentials since the pass was issued: its stored
    pass still says it has a save link, which the issuer can no longer sign."""
    account = stack.new_account("paid")
    with stack.client(headers=account.headers("live")) as live:
        issued = create_pass(live, create_template(live)["id"])
    mongo: MongoClient[dict[str, Any]]
    with MongoClient(stack.mongo_url) as mongo:
        mongo[stack.database]["passes"].update_one(
            {"_id": issued["id"]}, {"$set": {"google_save_url": ""}}
        )
    google = httpx2.get(f"{issued['url']}/google", follow_redirects=False)
    assert google.status_code == 404
    assert google.headers["content-type"].startswith("text/html")


def test_variant_a_answers_the_pass_page_as_google_when_google_is_not_configured(
    stack: Stack,
) -> None:
    account = stack.new_account("paid")
    with stack.client(headers=account.headers("live")) as live:
        template = create_template(live)
    response = httpx2.post(
        f"{stack.base_url}/passes",
        json={"templateId": template["id"], "data": {}},
        headers={"x-api-key": account.live_key},
    )
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["apple"].endswith("/pass.pkpass")
    assert body["google"] == body["apple"].removesuffix("/pass.pkpass")
    assert httpx2.get(body["google"]).status_code == 200


def ok_text(response: httpx2.Response) -> str:
    assert response.status_code == 200, response.text
    return response.text
