"""With private networks disallowed (production's default), a webhook host name that starts
resolving to a private address after the webhook was created is refused at delivery time and
nothing is sent (issue 5 section 5, acceptance 5; the create-time refusals are in
test_webhook_targets.py).

The names resolve through TESSERA_WEBHOOK_RESOLVER_HOSTS_FILE, the operator's override that the
webhooks service reads before DNS at every check, so the test can change an answer over time.
"""

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.api import create_pass, create_template
from tests.support.receiver import Receiver
from tests.support.stack import Stack, new_stack, serving
from tests.support.webhooks import create_webhook, settled

pytestmark = pytest.mark.e2e
PUBLIC = "93.184.216.34"
REBOUND = {
    "loopback.example.test": ["127.0.0.1"],
    "ipv6-loopback.example.test": ["::1"],
    "private.example.test": ["10.0.0.1"],
    "metadata.example.test": ["169.254.169.254"],
    "mixed.example.test": [PUBLIC, "127.0.0.1"],  # one private answer is enough to refuse
}


def _hosts(stack: Stack) -> Path:
    return stack.work_dir / "webhook-hosts"


def _write(path: Path, table: dict[str, list[str]]) -> None:
    path.write_text("".join(f"{a} {name}\n" for name, addrs in table.items() for a in addrs))


@pytest.fixture(scope="module")
def stack(
    nats_url: str, mongo_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    running = new_stack(nats_url, mongo_url, tmp_path_factory.mktemp("rebind-stack"))
    _write(_hosts(running), {name: [PUBLIC] for name in REBOUND})
    running.extra_env = {
        "TESSERA_WEBHOOK_ALLOW_PRIVATE_NETWORKS": "false",
        "TESSERA_WEBHOOK_RESOLVER_HOSTS_FILE": str(_hosts(running)),
        "TESSERA_WEBHOOK_RETRY_SCHEDULE": "0,1",
        "TESSERA_WEBHOOK_TIMEOUT_SECONDS": "1",
    }
    with serving(running):
        yield running


def test_a_name_rebound_to_a_private_address_is_refused_at_delivery(
    stack: Stack, receiver: Receiver
) -> None:
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        hooks = {
            name: create_webhook(client, receiver.url(f"/{name}", host=name), ["pass.issued"])
            for name in REBOUND
        }  # accepted: every name resolves to a public address now
        _write(_hosts(stack), REBOUND)
        create_pass(client, create_template(client)["id"])
        for name, hook in hooks.items():
            [delivery] = settled(client, hook["id"], 1)
            assert delivery["status"] == "dead"
            assert delivery["attempts"] == 2
            assert delivery["response_status"] is None
            body = delivery["response_body"]
            assert body.startswith("refused, nothing was sent"), body
            assert "not a public address" in body
            assert any(address in body for address in REBOUND[name] if address != PUBLIC)
    assert receiver.requests() == []


def test_the_override_applies_at_create_too(stack: Stack, receiver: Receiver) -> None:
    _write(_hosts(stack), {"pinned.example.test": ["127.0.0.1"]})
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        url = receiver.url("/pinned", host="pinned.example.test")
        refused = client.post("/v1/webhooks", json={"url": url, "events": ["*"]})
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["param"] == "url"
