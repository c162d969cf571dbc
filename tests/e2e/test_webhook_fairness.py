"""One account's slow webhooks never delay another account's deliveries (issue 10, F04,
acceptance 4), with the default concurrency settings on two webhooks replicas.

Account A has 40 webhooks on an endpoint that does not answer while the test runs and issues
enough passes for its deliveries to take every attempt slot of both replicas if nothing stopped
them (4 x 40 = 160 deliveries; 4 per endpoint x 40 endpoints = 160 could run at once, more than
two replicas' global pools). Each replica gives A only its per-account share, so a fresh account
B's delivery still goes out while every one of A's attempts is still waiting: none of A's slots
was given back first. The attempt timeout is longer than the test, so the only way a slot of A
is given back is the answer the endpoint never sends.
"""

from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from pymongo import MongoClient
from pymongo.synchronous.collection import Collection

from tests.support.api import create_pass, create_template
from tests.support.polling import poll
from tests.support.receiver import running_receiver
from tests.support.stack import Stack, new_stack, serving
from tests.support.webhooks import create_webhook

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
SLOW_WEBHOOKS = 40
PASSES = 4
# The slow endpoint answers only when the receiver closes, at the end of the test; the
# webhooks replicas wait for it longer than every deadline of the test together.
HOLD_SECONDS = 3600.0
ATTEMPT_TIMEOUT_SECONDS = 50  # below the default lease of 60 s, as the settings require
SHARE = 16  # TESSERA_WEBHOOKS_MAX_CONCURRENT_PER_ACCOUNT's default


@pytest.fixture(scope="module")
def stack(
    nats_url: str, mongo_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    running = new_stack(nats_url, mongo_url, tmp_path_factory.mktemp("fairness"), replicas=2)
    running.extra_env = {"TESSERA_WEBHOOK_TIMEOUT_SECONDS": str(ATTEMPT_TIMEOUT_SECONDS)}
    with serving(running):
        yield running


def _claims_by_replica(stack: Stack, account_id: str) -> tuple[int, Counter[str]]:
    """The account's deliveries, and how many of them each webhooks replica holds a live
    lease on (the claim token is `<replica>/<n>`): those in flight and those waiting for one
    of the account's sending slots."""
    mongo: MongoClient[dict[str, Any]]
    with MongoClient(stack.mongo_url) as mongo:
        deliveries: Collection[dict[str, Any]] = mongo[stack.database]["webhook_deliveries"]
        created = deliveries.count_documents({"account_id": account_id})
        leased = deliveries.find(
            {"account_id": account_id, "lease_until": {"$gt": datetime.now(UTC)}},
            {"lease_owner": 1},
        )
        held = Counter(doc["lease_owner"].rsplit("/", 1)[0] for doc in leased)
    return created, held


def test_a_slow_account_never_delays_another_accounts_delivery(stack: Stack) -> None:
    with running_receiver() as receiver:
        receiver.behave("/slow", delay_seconds=HOLD_SECONDS)
        busy = stack.new_account()
        with stack.client(headers=busy.headers()) as client:
            for _ in range(SLOW_WEBHOOKS):
                create_webhook(client, receiver.url("/slow"), ["pass.issued"])
            template = create_template(client)
            for _ in range(PASSES):
                create_pass(client, template["id"])

        def saturated() -> bool:
            created, held = _claims_by_replica(stack, busy.id)
            return (
                created == SLOW_WEBHOOKS * PASSES
                and sum(held.values()) == created
                and receiver.most_in_flight("/slow") >= SHARE
            )

        # Every delivery of A exists, leased by the replica(s) that fanned its events out, and
        # at least one replica sends A's whole share, each request waiting on the slow endpoint.
        poll(saturated, timeout=30, message="a replica sending the busy account's share")

        fresh = stack.new_account()
        with stack.client(headers=fresh.headers()) as client:
            create_webhook(client, receiver.url("/fast"), ["pass.issued"])
            template = create_template(client)
            create_pass(client, template["id"])
            poll(lambda: receiver.requests("/fast"), timeout=15, message="B's delivery")
        # B's request went out while every request of A was still waiting for its answer, and
        # every delivery of A was still held by a replica (no attempt of A had ended): B took
        # none of A's slots, it did not wait for one to be given back.
        slow = receiver.requests("/slow")
        assert receiver.in_flight("/slow") == len(slow) >= SHARE
        created, held = _claims_by_replica(stack, busy.id)
        assert sum(held.values()) == created == SLOW_WEBHOOKS * PASSES
        # Still A's share only: the slow endpoint never got more requests at once than two
        # replicas' shares.
        assert receiver.most_in_flight("/slow") <= 2 * SHARE
