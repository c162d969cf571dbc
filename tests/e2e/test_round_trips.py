"""MongoDB round trips of one POST /v1/passes, counted by the services themselves
(`tessera_mongodb_commands_total`, shared/mongo.py), held to the figures in
docs/performance.md; and the guarantees the api's principal cache must keep on every replica:
a revoked key and a changed plan act on the very next request (issue 12, acceptance 7)."""

from collections.abc import Iterator

import httpx2
import pytest
from prometheus_client.parser import text_string_to_metric_families

from bench.commands import Counts, level_delta, parse
from tests.support.api import assert_error, create_template, ok
from tests.support.polling import poll
from tests.support.stack import Account, Stack

pytestmark = pytest.mark.e2e

WARMUP = 20
MEASURED = 30
# The figures docs/performance.md documents, per pass in the steady state, with an
# Idempotency-Key: the api's claim and finish of the key's record plus a lease per block of rate
# and quota units; the issuer's command (its writes in one bulkWrite, the commit; the template
# from its cache; no replay lookup first: a replay is refused by its marker), which publishes
# its events itself (its relay leases none of them); one insert (events) and one query
# (webhooks, no webhook subscribed) per consumed batch, at most one per event.
API_HTTP = 2.5
ISSUER_COMMAND = 2.0
EVENTS_CONSUMER = 1.0
WEBHOOKS_CONSUMER = 1.0


@pytest.fixture(scope="module")
def stack(own_stack: Stack) -> Stack:
    """A stack of its own: the command counters are process-wide."""
    return own_stack


def _metrics(stack: Stack, service: str) -> list[str]:
    """The /metrics page of every replica of `service`."""
    pages = []
    for member in stack.members(service):
        response = httpx2.get(f"http://{stack.host}:{member.port(stack.api_port)}/metrics")
        assert response.status_code == 200
        pages.append(response.text)
    return pages


def _commands(stack: Stack) -> Counts:
    total = Counts()
    for service in ("api", "issuer", "events", "webhooks"):
        for page in _metrics(stack, service):
            for key, value in parse(page).values.items():
                total.values[key] = total.values.get(key, 0.0) + value
    return total


def _webhooks_consumer_idle(stack: Stack) -> bool:
    pending = 0.0
    for page in _metrics(stack, "webhooks"):
        for family in text_string_to_metric_families(page):
            for sample in family.samples:
                if sample.name == "tessera_jetstream_consumer_pending":
                    pending = max(pending, sample.value)
    return pending == 0


def _per_pass(delta: Counts, service: str, origin: str) -> float:
    spent = sum(v for (s, o, _), v in delta.values.items() if (s, o) == (service, origin))
    return spent / MEASURED


def _issue(client: httpx2.Client, template_id: str, count: int, first: int) -> list[str]:
    made = []
    for number in range(first, first + count):
        response = client.post(
            "/v1/passes",
            json={"template_id": template_id, "holder_name": f"Holder {number}"},
            headers={"Idempotency-Key": f"round-trips-{number}"},
        )
        made.append(ok(response)["id"])
    return made


def _wait_recorded(client: httpx2.Client, pass_ids: list[str]) -> None:
    def created() -> set[str]:
        listed = ok(client.get("/v1/events", params={"limit": 100}))["data"]
        return {event["pass_id"] for event in listed if event["type"] == "created"}

    poll(created, lambda seen: set(pass_ids) <= seen, message="every created event")


def _replica_clients(stack: Stack, key: str) -> Iterator[httpx2.Client]:
    for member in stack.members("api"):
        yield httpx2.Client(
            base_url=f"http://{stack.host}:{member.port(stack.api_port)}",
            headers={"Authorization": f"Bearer {key}"},
            timeout=30.0,
        )


def test_a_pass_costs_the_documented_round_trips(stack: Stack) -> None:
    account = stack.new_account("paid")
    # One replica's own port, so the measured requests meet a warm principal cache.
    with next(_replica_clients(stack, account.test_key)) as client:
        template = create_template(client)
        _wait_recorded(client, _issue(client, template["id"], WARMUP, 0))
        poll(lambda: _webhooks_consumer_idle(stack), message="the webhooks consumer idle")
        before = _commands(stack)
        made = _issue(client, template["id"], MEASURED, WARMUP)
        answered = _commands(stack)
        _wait_recorded(client, made)
        poll(lambda: _webhooks_consumer_idle(stack), message="the webhooks consumer idle")
        delta = level_delta(before, answered, _commands(stack))

    api = _by_command(delta, "api", "http")
    # Every request claims and finishes its key's record; none reads the key or the account.
    assert api.get("insert") == MEASURED
    assert api.get("update") == MEASURED
    assert api.get("find", 0) == 0
    assert _per_pass(delta, "api", "http") <= API_HTTP
    assert _per_pass(delta, "issuer", "command") <= ISSUER_COMMAND
    issuer = _by_command(delta, "issuer", "command")
    assert issuer.get("bulkWrite") == MEASURED
    assert issuer.get("commitTransaction") == MEASURED
    # No read: the template comes from the issuer's cache; no lookup of the command id first.
    assert issuer.get("find", 0) == 0
    # No claim leased an event: each command published its own events (shared/outbox.py).
    assert _by_command(delta, "issuer", "background").get("update", 0) == 0
    assert _per_pass(delta, "events", "consumer") <= EVENTS_CONSUMER
    assert _per_pass(delta, "webhooks", "consumer") <= WEBHOOKS_CONSUMER


def _by_command(delta: Counts, service: str, where: str) -> dict[str, float]:
    return {c: value for (s, o, c), value in delta.values.items() if (s, o) == (service, where)}


def _new_key(stack: Stack, account: Account) -> tuple[str, str]:
    with stack.client(headers=stack.admin_headers()) as admin:
        response = admin.post(f"/admin/v1/accounts/{account.id}/api_keys", json={"mode": "test"})
        created = ok(response, 201)
    return created["id"], created["key"]


def _api_finds(stack: Stack) -> float:
    """The reads the api's requests made so far (the key and its account, when not cached)."""
    return sum(
        value for key, value in _commands(stack).values.items() if key == ("api", "http", "find")
    )


def test_a_revoked_key_is_refused_by_every_replica_on_the_next_request(stack: Stack) -> None:
    account = stack.new_account()
    key_id, key = _new_key(stack, account)
    clients = list(_replica_clients(stack, key))
    assert len(clients) >= 2
    try:
        for client in clients:  # a malformed pass id is a 404 that reads nothing once authed
            assert_error(client.get("/v1/passes/nope"), 404, "not_found_error")
        finds = _api_finds(stack)
        for client in clients:
            assert_error(client.get("/v1/passes/nope"), 404, "not_found_error")
        assert _api_finds(stack) == finds  # every replica answered the key from its cache
        with stack.client(headers=stack.admin_headers()) as admin:
            ok(admin.delete(f"/admin/v1/api_keys/{key_id}"))
        for client in clients:
            assert_error(client.get("/v1/passes/nope"), 401, "authentication_error")
        # The account's other keys are untouched.
        with next(_replica_clients(stack, account.test_key)) as other:
            assert_error(other.get("/v1/passes/nope"), 404, "not_found_error")
    finally:
        for client in clients:
            client.close()


def test_a_plan_change_acts_on_the_next_request_on_every_replica(stack: Stack) -> None:
    account = stack.new_account("free")
    clients = list(_replica_clients(stack, account.live_key))
    try:
        for client in clients:
            assert_error(client.get("/v1/passes/nope"), 403, "authorization_error")
        with stack.client(headers=stack.admin_headers()) as admin:
            ok(admin.patch(f"/admin/v1/accounts/{account.id}", json={"plan": "paid"}))
        for client in clients:
            assert_error(client.get("/v1/passes/nope"), 404, "not_found_error")
    finally:
        for client in clients:
            client.close()
