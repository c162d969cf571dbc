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
]


@pytest.mark.parametrize("url", REFUSED)
def test_private_targets_are_refused_at_create_and_update(stack: Stack, url: str) -> None:
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        created = client.post("/v1/webhooks", json={"url": url, "events": ["*"]})
        assert created.status_code == 400, created.text
        assert created.json()["error"]["param"] == "url"
        assert client.get("/v1/webhooks").json()["data"] == []
        public = client.post(
            "/v1/webhooks", json={"url": "https://93.184.216.34/hook", "events": ["*"]}
        )
        assert public.status_code == 200, public.text
        hook = public.json()
        updated = client.patch(f"/v1/webhooks/{hook['id']}", json={"url": url})
        assert updated.status_code == 400
        assert updated.json()["error"]["param"] == "url"
        assert client.get(f"/v1/webhooks/{hook['id']}").json()["url"] == hook["url"]
