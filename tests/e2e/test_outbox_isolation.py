"""Issue 10, F01: one tenant's event that NATS cannot carry no longer stops every tenant's events.

An outbox document over NATS's max_payload (the red team made one with two PATCHes; the size
limits now refuse those, so the test inserts it) used to fail its batch of 100 forever. Now it
is set aside in `outbox_dead_letters`, counted by a metric, and the events behind it flow.
"""

from datetime import UTC, datetime
from typing import Any

import httpx2
import pytest

from tests.support.api import TEMPLATE_BODY
from tests.support.database import stack_db
from tests.support.polling import poll
from tests.support.stack import Stack

pytestmark = pytest.mark.e2e
TENANTS = 20
PASSES_EACH = 5


@pytest.fixture(scope="module")
def stack(own_stack: Stack) -> Stack:
    """A stack of its own: it poisons the issuer's outbox and counts every dead letter."""
    return own_stack


def _poison(stack: Stack) -> str:
    """An outbox document larger than NATS carries, first in `_id` order."""
    event_id = "psEvnt_000000000000000000"
    with stack_db(stack) as db:
        db["outbox"].insert_one(
            {
                "_id": event_id,
                "subject": "tessera.events.pass.updated",
                "payload": b"x" * (1024 * 1024 + 1),
                "created_at": datetime.now(UTC),
            }
        )
    return event_id


def _issue_for_many_tenants(stack: Stack) -> list[str]:
    pass_ids: list[str] = []
    for _ in range(TENANTS):
        account = stack.new_account()
        with stack.client(headers=account.headers()) as client:
            template = client.post("/v1/templates", json=TEMPLATE_BODY).json()
            for _ in range(PASSES_EACH):
                response = client.post("/v1/passes", json={"template_id": template["id"]})
                assert response.status_code == 200, response.text
                pass_ids.append(response.json()["id"])
    return pass_ids


def _recorded(stack: Stack, pass_ids: list[str]) -> int:
    with stack_db(stack) as db:
        events = db["pass_events"]
        return events.count_documents({"pass_id": {"$in": pass_ids}, "type": "created"})


def _dead_letters(stack: Stack) -> list[dict[str, Any]]:
    with stack_db(stack) as db:
        return list(db["outbox_dead_letters"].find())


def _gauge(stack: Stack, name: str) -> float:
    """The issuer's outbox's value of `name` (every outbox gauge is labelled by its owner)."""
    values = []
    for member in stack.members("issuer"):
        url = f"http://{stack.host}:{member.port(stack.api_port)}/metrics"
        for line in httpx2.get(url, timeout=10.0).text.splitlines():
            if line.startswith(f'{name}{{owner="issuer"}} '):
                values.append(float(line.split()[1]))
    return max(values)


def test_an_unpublishable_event_is_set_aside_and_every_other_tenant_s_events_flow(
    stack: Stack,
) -> None:
    poisoned = _poison(stack)
    pass_ids = _issue_for_many_tenants(stack)
    # "Within seconds": the relay wakes on every commit; the deadline only bounds a failure.
    poll(lambda: _recorded(stack, pass_ids), lambda n: n == len(pass_ids), timeout=30)
    dead = poll(lambda: _dead_letters(stack), lambda found: len(found) == 1)
    assert dead[0]["_id"] == poisoned
    assert "over the" in dead[0]["reason"]
    with stack_db(stack) as db:
        assert db["outbox"].count_documents({"_id": poisoned}) == 0
    assert _gauge(stack, "tessera_outbox_dead_letters") == 1
    assert "set aside" in stack.log_text("issuer")
