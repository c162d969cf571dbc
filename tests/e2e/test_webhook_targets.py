"""With private networks disallowed (production's default), a webhook URL that is or resolves
to a non-public address is refused at create and at update (issue 5 section 5)."""

from collections.abc import Iterator

import pytest

from tests.support.stack import Stack, new_stack, serving

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def stack(
    nats_url: str, mongo_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    running = new_stack(nats_url, mongo_url, tmp_path_factory.mktemp("ssrf-stack"))
    running.extra_env = {"TESSERA_WEBHOOK_ALLOW_PRIVATE_NETWORKS": "false"}
    with serving(running):
        yield running


REFUSED = [
    "http://127.0.0.1:8080/hook",
    "http://[::1]/hook",
    "http://10.0.0.1/hook",
    "http://169.254.169.254/latest/meta-data/",
    "http://localhost:8080/hook",  # a host name that resolves to 127.0.0.1
    "http://100.64.0.1/hook",
    "http://[::ffff:127.0.0.1]/hook",
    # IPv6 forms that carry an IPv4 address (issue 10, F08): NAT64, local-use NAT64, 6to4,
    # IPv4-compatible, SIIT.
    "http://[64:ff9b::169.254.169.254]/latest/meta-data/",
    "http://[64:ff9b:1::a9fe:a9fe]/hook",
    "http://[2002:a9fe:a9fe::1]/hook",
    "http://[::169.254.169.254]/hook",
    "http://[::ffff:0:169.254.169.254]/hook",
]


@pytest.mark.parametrize("url", REFUSED)
def test_private_targets_are_refused_at_create_and_update(stack: Stack, url: str) -> None:
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        # Disabled, so that nothing would be sent even if the check let one through.
        created = client.post("/v1/webhooks", json={"url": url, "events": ["*"], "enabled": False})
        assert created.status_code == 400, created.text
        assert created.json()["error"]["param"] == "url"
        assert client.get("/v1/webhooks").json()["data"] == []
        public = client.post(
            "/v1/webhooks",
            json={"url": "https://93.184.216.34/hook", "events": ["*"], "enabled": False},
        )
        assert public.status_code == 200, public.text
        hook = public.json()
        updated = client.patch(f"/v1/webhooks/{hook['id']}", json={"url": url})
        assert updated.status_code == 400
        assert updated.json()["error"]["param"] == "url"
        assert client.get(f"/v1/webhooks/{hook['id']}").json()["url"] == hook["url"]


def test_a_public_address_behind_nat64_is_allowed(stack: Stack) -> None:
    # On an IPv6-only network with DNS64, a public host resolves to 64:ff9b::<its IPv4>.
    account = stack.new_account()
    url = "http://[64:ff9b::93.184.216.34]/hook"
    with stack.client(headers=account.headers()) as client:
        created = client.post("/v1/webhooks", json={"url": url, "events": ["*"], "enabled": False})
    assert created.status_code == 200, created.text
