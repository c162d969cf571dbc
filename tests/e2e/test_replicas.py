"""Two replicas of every service (issue 7, section 6) share the work with no duplicate side
effect: every api, issuer and webhooks replica handles part of it, and still each pass has one
`created` event, each (event, webhook) one delivery, and each delivery one request.

Every end-to-end module runs two replicas by default (TESSERA_TEST_REPLICAS); this one runs two
whatever that says, and checks in the replicas' own logs that the work was really spread.
"""

from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx2
import pytest

from tessera.processes import SERVICES
from tests.support.api import all_events, create_template
from tests.support.polling import poll
from tests.support.receiver import Receiver
from tests.support.stack import Account, Stack, new_stack, serving
from tests.support.webhooks import body_of, create_webhook, settled

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
PASSES = 40


@pytest.fixture(scope="module")
def stack(
    nats_url: str, mongo_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    running = new_stack(nats_url, mongo_url, tmp_path_factory.mktemp("replicas"), replicas=2)
    with serving(running):
        yield running


def _issue(stack: Stack, account: Account, template_id: str, count: int) -> list[str]:
    # One connection per request: the kernel spreads connections, not requests, over replicas.
    issued = []
    for _ in range(count):
        with stack.client(headers=account.headers()) as client:
            response = client.post("/v1/passes", json={"template_id": template_id})
        assert response.status_code == 200, response.text
        issued.append(response.json()["id"])
    return issued


def _log(stack: Stack, replica: str) -> str:
    return (stack.work_dir / "logs" / f"{replica}.log").read_text()


def test_each_replica_answers_on_its_own_port_too(stack: Stack) -> None:
    for service in SERVICES:
        members = stack.members(service)
        assert len(members) == 2
        for member in members:
            response = httpx2.get(f"http://{stack.host}:{member.port(stack.api_port)}/readyz")
            assert response.status_code == 200, (member.name, response.text)


def test_replicas_share_the_work_without_duplicate_side_effects(
    stack: Stack, receiver: Receiver
) -> None:
    receiver.behave("/shared", delay_seconds=0.05)
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        hook = create_webhook(client, receiver.url("/shared"), ["pass.issued"])
        template = create_template(client)
    with ThreadPoolExecutor(4) as pool:
        batches = pool.map(lambda _: _issue(stack, account, template["id"], PASSES // 4), range(4))
        issued = [pass_id for batch in batches for pass_id in batch]
    assert len(set(issued)) == PASSES

    with stack.client(headers=account.headers()) as client:
        final = settled(client, hook["id"], PASSES, timeout=60)
        events = poll(lambda: all_events(client), lambda found: len(found) >= PASSES)
    assert Counter(e["pass_id"] for e in events if e["type"] == "created") == Counter(issued)
    assert {(d["status"], d["attempts"]) for d in final} == {("delivered", 1)}
    assert set(receiver.attempts("/shared").values()) == {1}
    sent_for = Counter(body_of(r)["data"]["pass"]["id"] for r in receiver.requests("/shared"))
    assert sent_for == Counter(issued)

    for name in stack.replica_names("api"):
        assert _log(stack, name).count("POST /v1/passes") > 0, f"{name} served no request"
    for name in stack.replica_names("issuer"):
        assert _log(stack, name).count("create_pass") > 0, f"{name} handled no command"
    for name in stack.replica_names("webhooks"):
        sent = _log(stack, name).count(f"to {hook['id']} attempt")
        assert sent > 0, f"{name} sent no delivery"
