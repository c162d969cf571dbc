"""The fault scenario of `make test-faults` (tests/faults/test_kill_and_restart.py, and the NATS
cluster's in tests/faults/test_nats_cluster.py): under a steady load of pass creations, updates
and webhook deliveries, each fault in turn; then nothing acknowledged is lost, nothing is
recorded twice, and nothing is left pending.

"Exactly once" for events means, read back through the API once everything has settled:
- no event id appears twice in `GET /v1/events`;
- every stored pass has exactly one `created` event, and every `created` event names a stored
  pass (so a create that was retried, or re-sent by a recovering service, recorded once);
- every pass has exactly one `updated` event per committed update: the store's pass `version`
  counts the committed updates (it starts at 1 and each update adds one), and that count lies
  between the client's successful updates of the pass and those plus the ones it gave up on.

For webhooks: each subscribed webhook has exactly one delivery per event of a type it wants
(docs/webhooks.md), every one `delivered`, none pending or failed; the receiver got each at
least once, and a delivery sent again carried the same bytes, so the same event id.

A fault may `hold` the stack in its faulty state: the scenario then also waits, before the
fault's `recover`, for passes issued meanwhile to have their events recorded (published to the
stream and consumed), so that a fault the stack cannot ride out fails the scenario.
"""

import json
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import httpx2
from pymongo import MongoClient
from pymongo.synchronous.database import Database

from services.webhooks.mapping import webhook_type
from tessera.processes import PORT_OFFSETS, SERVICES
from tests.support.api import TEMPLATE_BODY, all_events, all_passes, create_template
from tests.support.faults import RETRYABLE_500_CODES, Load, log_problems
from tests.support.polling import poll
from tests.support.receiver import Receiver
from tests.support.stack import Stack
from tests.support.webhooks import body_of, create_webhook

WARM_UP_PASSES = 10
# Passes issued after a fault before the next one: the stack is working again, and the load
# between faults is steady state, not only recovery.
PASSES_BETWEEN_FAULTS = 8
# The receiver answers after this long, so a killed webhooks service has attempts in flight.
RECEIVER_DELAY_SECONDS = 0.1
RECOVERY_TIMEOUT = 90.0  # longest wait for the first successful create after a fault
QUIET_TIMEOUT = 120.0  # longest wait, once the load stopped, for everything to settle
HOOKS = {"/all": ["*"], "/issued": ["pass.issued"]}
# What a client may see while a process is down, all retryable (see tests/support/faults.py).
EXPECTED_TRANSIENT = {f"500 {code}" for code in RETRYABLE_500_CODES} | {
    "409 idempotency_request_in_progress",
    "ConnectError",
    "ConnectTimeout",
    "WriteError",
    "RemoteProtocolError",
    "ReadError",
    "ReadTimeout",
}


@dataclass(frozen=True)
class Fault:
    name: str
    inject: Callable[[], None]
    # For a fault the stack must ride out while it lasts: what ends it (a node started again).
    recover: Callable[[], None] | None = None


def _all_ready(stack: Stack) -> bool:
    """Every service answers /readyz 200: its MongoDB and NATS connections are back."""
    with httpx2.Client(timeout=2.0) as client:
        for name in SERVICES:
            url = f"http://{stack.host}:{stack.api_port + PORT_OFFSETS[name]}/readyz"
            try:
                if client.get(url).status_code != 200:
                    return False
            except httpx2.HTTPError:
                return False
    return True


@dataclass
class Settled:
    """What the store holds for the account, read directly."""

    versions: dict[str, int]  # pass id -> version
    events: int
    outbox: int
    deliveries: dict[str, list[dict[str, Any]]]  # webhook id -> its deliveries

    def unsettled(self, hook_ids: dict[str, str], received: set[str]) -> list[str]:
        """What is still under way (or lost, if it stays so): empty once all has settled."""
        wanted = len(self.versions) + sum(version - 1 for version in self.versions.values())
        expected = {"/all": self.events, "/issued": len(self.versions)}
        found = [
            f"{self.outbox} events in the outbox" if self.outbox else "",
            f"{self.events} events recorded of {wanted}" if self.events < wanted else "",
        ]
        for path, count in expected.items():
            deliveries = self.deliveries[hook_ids[path]]
            if len(deliveries) < count:
                found.append(f"{path}: {len(deliveries)} deliveries of {count}")
            waiting = [d["_id"] for d in deliveries if d["status"] != "delivered"]
            unseen = [d["_id"] for d in deliveries if d["_id"] not in received]
            if waiting or unseen:
                found.append(f"{path}: not delivered {waiting[:5]}, not received {unseen[:5]}")
        return [reason for reason in found if reason]


def _read_store(stack: Stack, account_id: str, hook_ids: list[str]) -> Settled:
    mongo: MongoClient[dict[str, Any]]
    with MongoClient(stack.mongo_url, serverSelectionTimeoutMS=5000) as mongo:
        db: Database[dict[str, Any]] = mongo[stack.database]
        scope = {"account_id": account_id}
        versions = {d["_id"]: d["version"] for d in db.passes.find(scope, {"version": 1})}
        deliveries: dict[str, list[dict[str, Any]]] = defaultdict(list)
        fields = {"payload": 0}
        for doc in db.webhook_deliveries.find({"webhook_id": {"$in": hook_ids}}, fields):
            deliveries[doc["webhook_id"]].append(doc)
        return Settled(
            versions=versions,
            events=db.pass_events.count_documents(scope),
            outbox=db.outbox.count_documents({}),
            deliveries=deliveries,
        )


def _inject_all(stack: Stack, faults: list[Fault], load: Load) -> list[str]:
    """Each fault in turn, once the load is going; after each, wait until every service is
    ready again and a pass is issued (with `recover`: and their events recorded, then recover).
    Returns a line per fault for the report."""
    timings: list[str] = []
    poll(
        lambda: len(load.settled("create", "ok")) >= WARM_UP_PASSES,
        timeout=60,
        message="the first passes",
    )
    for fault in faults:
        start = time.monotonic()
        fault.inject()
        back = time.monotonic()
        poll(
            lambda: _all_ready(stack),
            timeout=RECOVERY_TIMEOUT,
            message=f"readiness after {fault.name}",
        )

        def issued(since: float = back) -> bool:
            return len(load.settled("create", "ok", after=since)) >= PASSES_BETWEEN_FAULTS

        poll(issued, timeout=RECOVERY_TIMEOUT, message=f"passes issued after {fault.name}")
        recovered = min(op.finished_at for op in load.settled("create", "ok", after=back))
        line = (
            f"  {fault.name}: back in {back - start:.1f}s, "
            f"next pass issued {recovered - back:.1f}s later"
        )
        if fault.recover is not None:
            made = [op.pass_id for op in load.settled("create", "ok", after=back) if op.pass_id]
            poll(
                partial(_recorded, stack, made),
                timeout=RECOVERY_TIMEOUT,
                message=f"the events of passes issued during {fault.name} recorded",
            )
            line += f", their events recorded {time.monotonic() - back:.1f}s after the fault"
            fault.recover()
        timings.append(line)
    return timings


def _recorded(stack: Stack, pass_ids: list[str]) -> bool:
    """Every pass has its `created` event recorded: published to the stream and consumed."""
    mongo: MongoClient[dict[str, Any]]
    with MongoClient(stack.mongo_url, serverSelectionTimeoutMS=5000) as mongo:
        found = mongo[stack.database].pass_events.count_documents(
            {"pass_id": {"$in": pass_ids}, "type": "created"}
        )
    return found == len(pass_ids)


def _wait_quiet(settled: Callable[[], tuple[Settled, list[str]]]) -> Settled:
    last: dict[str, Settled] = {}

    def unsettled() -> list[str]:
        last["state"], waiting_for = settled()
        return waiting_for

    # A failure names what is still unsettled, not the whole (large) state.
    poll(unsettled, lambda waiting: not waiting, QUIET_TIMEOUT, "a quiet stack", interval=0.2)
    return last["state"]


def run_under_faults(stack: Stack, receiver: Receiver, faults: list[Fault]) -> None:
    """The scenario: the load, each of `faults` in turn, then the checks."""
    began = time.monotonic()
    account = stack.new_account(plan="paid")
    for path in HOOKS:
        receiver.behave(path, delay_seconds=RECEIVER_DELAY_SECONDS)
    with stack.client(headers=account.headers()) as client:
        template = create_template(client, TEMPLATE_BODY)
        hooks = {
            path: create_webhook(client, receiver.url(path), kinds) for path, kinds in HOOKS.items()
        }
    hook_ids = {path: hook["id"] for path, hook in hooks.items()}

    def settled() -> tuple[Settled, list[str]]:
        received = {r.delivery_id for r in receiver.requests() if r.status == 200}
        found = _read_store(stack, account.id, list(hook_ids.values()))
        return found, found.unsettled(hook_ids, received)

    load = Load(stack, account, template["id"])
    load.start()
    settled_ok = False
    try:
        timings = _inject_all(stack, faults, load)
        load.finish(timeout=QUIET_TIMEOUT)
        store_state = _wait_quiet(settled)
        settled_ok = True
    finally:
        load.abort()
        logs = stack.work_dir / "logs"
        print(f"\nwarnings and errors in {logs}:", *log_problems(logs) or ["  none"], sep="\n")
        if not settled_ok:
            print("the load until the failure:", *load.summary(), sep="\n")
    with stack.client(headers=account.headers()) as client:
        passes = all_passes(client)
        events = all_events(client)
    lines = _report(passes, events, receiver, store_state, hook_ids)
    wall = f"wall time {time.monotonic() - began:.0f}s"
    print("fault injection:", *timings, *load.summary(), *lines, wall, sep="\n")

    _check_clients(load)
    _check_passes(load, passes)
    _check_events(load, events, store_state)
    _check_webhooks(events, receiver, store_state, hook_ids)


def _report(
    passes: list[dict[str, Any]],
    events: list[dict[str, Any]],
    receiver: Receiver,
    store_state: Settled,
    hook_ids: dict[str, str],
) -> list[str]:
    kinds = Counter(e["type"] for e in events)
    committed = sum(v - 1 for v in store_state.versions.values())
    lines = [
        f"passes stored: {len(passes)}; updates committed: {committed}",
        f"events recorded: {len(events)} ({kinds['created']} created, {kinds['updated']} updated), "
        f"{len(events) - len({e['id'] for e in events})} duplicate ids",
    ]
    for path, hook_id in hook_ids.items():
        requests = receiver.requests(path)
        found = store_state.deliveries[hook_id]
        statuses = Counter(d["status"] for d in found)
        lines.append(
            f"webhook {path} {HOOKS[path]}: {len(found)} deliveries "
            f"({', '.join(f'{s} {n}' for s, n in statuses.items())}), "
            f"{len(requests)} requests received for "
            f"{len({body_of(r)['id'] for r in requests})} events, "
            f"{len(requests) - len({r.delivery_id for r in requests})} duplicates (a delivery "
            "sent again: same webhook-id, same event id), "
            f"{sum(d['attempts'] - 1 for d in found)} retries recorded"
        )
    return lines


def _check_clients(load: Load) -> None:
    rejected = [(op.key, op.last_error) for op in load.ops if op.outcome == "rejected"]
    assert rejected == [], f"writes refused for good: {rejected}"
    unexpected = set(load.errors) - EXPECTED_TRANSIENT
    assert not unexpected, f"answers no outage explains: {load.errors}"


def _check_passes(load: Load, passes: list[dict[str, Any]]) -> None:
    stored = {p["id"]: p for p in passes}
    for op in load.settled("create", "ok"):
        assert op.pass_id in stored, f"pass {op.pass_id} got a 2xx but is not stored"
        assert stored[op.pass_id]["holder_name"] == op.key
    # Each key made at most one pass: the retries of a key did not issue it twice. A pass may
    # exist for a key whose client gave up (its last attempt committed, the reply was lost).
    keys = Counter(p["holder_name"] for p in passes)
    assert [key for key, n in keys.items() if n > 1] == []
    sent = {op.key for op in load.ops if op.kind == "create"}
    assert set(keys) <= sent


def _check_events(load: Load, events: list[dict[str, Any]], store_state: Settled) -> None:
    ids = Counter(e["id"] for e in events)
    assert [i for i, n in ids.items() if n > 1] == [], "an event was recorded twice"
    assert {e["type"] for e in events} <= {"created", "updated"}
    created = Counter(e["pass_id"] for e in events if e["type"] == "created")
    assert created == Counter(store_state.versions.keys()), "created events != stored passes"
    updated = Counter(e["pass_id"] for e in events if e["type"] == "updated")
    ok = Counter(op.pass_id for op in load.settled("update", "ok"))
    gave_up = Counter(op.pass_id for op in load.settled("update", "failed"))
    for pass_id, version in store_state.versions.items():
        committed = version - 1
        assert updated[pass_id] == committed, (pass_id, updated[pass_id], committed)
        assert ok[pass_id] <= committed <= ok[pass_id] + gave_up[pass_id], pass_id


def _check_webhooks(
    events: list[dict[str, Any]], receiver: Receiver, store_state: Settled, hook_ids: dict[str, str]
) -> None:
    kinds = {e["id"]: webhook_type(e["type"], e["metadata"]) for e in events}
    for path, subscribed in HOOKS.items():
        wanted = {
            i for i, kind in kinds.items() if kind and ("*" in subscribed or kind in subscribed)
        }
        found = store_state.deliveries[hook_ids[path]]
        stuck = [
            (d["_id"], d["status"], d["attempts"]) for d in found if d["status"] != "delivered"
        ]
        assert stuck == [], f"deliveries of {path} not delivered"
        assert Counter(d["event_id"] for d in found) == Counter(wanted), (
            f"one delivery per event ({path})"
        )
        # Every request of a delivery carries the same bytes, so the same event id.
        bodies: dict[str, set[bytes]] = defaultdict(set)
        for request in receiver.requests(path):
            bodies[request.delivery_id].add(request.body)
            assert request.headers["svc-event-type"] == kinds.get(body_of(request)["id"])
        assert [d for d, seen in bodies.items() if len(seen) > 1] == [], "a retry changed its body"
        event_of = {
            delivery: json.loads(next(iter(seen)))["id"] for delivery, seen in bodies.items()
        }
        assert set(event_of.values()) == wanted, f"{path} missed events"
        assert len(event_of) == len(wanted), f"{path}: two deliveries for one event"
