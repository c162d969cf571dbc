"""Issue 13, acceptance 8: kill -9 the issuer while 100 single-use tickets are scanned, each by
two gates at once, every gate retrying with its own Idempotency-Key until it gets an answer.
Every ticket ends with redemption_count 1, exactly one `redeemed` event each, and exactly one
accepted scan: no two answers (and no answer and a retry of another gate) say accepted for one
ticket, and a retried scan answers the scan it made, not a second one.

A killed issuer's transaction commits nothing of the scan (count, scan record, event and stored
answer are one transaction); the gate's retry re-sends the same command id, which runs afresh
or answers the stored result (docs/redemption.md).
"""

import operator
import threading
import time
import uuid
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

import httpx2
import pytest
from pymongo import MongoClient

from tests.support.api import ok
from tests.support.faults import kill_and_restart, log_problems
from tests.support.polling import poll
from tests.support.stack import Stack

pytestmark = [pytest.mark.faults, pytest.mark.e2e, pytest.mark.slow]

PASSES = 100
GATES = 2
DEADLINE_SECONDS = 240.0


class Gates:
    """Scans every ticket from GATES gates at once; a gate retries (same key) until answered."""

    def __init__(self, stack: Stack, headers: dict[str, str], tickets: list[str]):
        bases = [f"http://{stack.host}:{m.port(stack.api_port)}" for m in stack.members("api")]
        self._clients = [httpx2.Client(base_url=b, headers=headers, timeout=30.0) for b in bases]
        self._tickets = tickets
        self._lock = threading.Lock()
        self.answers: dict[tuple[str, int], dict[str, Any]] = {}
        # Every 200 answer each gate got, retries of its key included.
        self.seen: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
        self.retries: Counter[str] = Counter()

    def scan(self, ticket: str, gate: int) -> None:
        key = str(uuid.uuid4())
        client = self._clients[gate % len(self._clients)]
        deadline = time.monotonic() + DEADLINE_SECONDS
        while time.monotonic() < deadline:
            try:
                response = client.post(
                    "/v1/scans", json={"code": ticket}, headers={"Idempotency-Key": key}
                )
            except httpx2.HTTPError as exc:
                self._retry(type(exc).__name__)
                continue
            if response.status_code == 200:
                with self._lock:
                    self.seen[ticket, gate].append(response.json())
                    self.answers[ticket, gate] = response.json()
                # One more try with the same key must replay the same answer.
                again = client.post(
                    "/v1/scans", json={"code": ticket}, headers={"Idempotency-Key": key}
                )
                if again.status_code == 200:
                    with self._lock:
                        self.seen[ticket, gate].append(again.json())
                return
            self._retry(str(response.status_code))
        raise AssertionError(f"gate {gate} got no answer for {ticket}")

    def answered(self) -> int:
        with self._lock:
            return len(self.answers)

    def _retry(self, label: str) -> None:
        with self._lock:
            self.retries[label] += 1
        time.sleep(0.2)  # a client's backoff before it retries, not a wait for async work

    def close(self) -> None:
        for client in self._clients:
            client.close()


@pytest.mark.timeout(600)
def test_scans_survive_kill_9_of_the_issuer(stack: Stack) -> None:
    account = stack.new_account(plan="paid")
    headers = account.headers()
    with stack.client(headers=headers) as client:
        template = ok(
            client.post(
                "/v1/templates",
                json={
                    "name": "Gig",
                    "type": "event",
                    "apple_style": "eventTicket",
                    "design": {
                        "organization_name": "Acme Live",
                        "description": "Ticket",
                        "barcode": {"format": "qr", "message": "{serial_number}"},
                    },
                },
            )
        )
        rows = [{"template_id": template["id"]} for _ in range(PASSES)]
        made = ok(client.post("/v1/passes/batch", json={"passes": rows}))
    tickets = {row["pass"]["serial_number"]: row["pass"]["id"] for row in made["data"]}
    assert len(tickets) == PASSES
    gates = Gates(stack, headers, list(tickets))
    replicas = stack.replica_names("issuer")
    timings: list[str] = []
    try:
        with ThreadPoolExecutor(max_workers=40) as pool:
            work = [pool.submit(gates.scan, t, g) for t in tickets for g in range(GATES)]
            for victims, after in (([replicas[0]], 20), (replicas, 80)):
                poll(
                    gates.answered,
                    partial(operator.le, after),
                    timeout=DEADLINE_SECONDS,
                    message=f"{after} answers",
                )
                killed_at = time.monotonic()
                kill_and_restart(stack, victims)
                timings.append(
                    f"  kill -9 {' and '.join(victims)} after {after}+ answers: back in "
                    f"{time.monotonic() - killed_at:.1f}s"
                )
            for done in work:
                done.result()
    finally:
        gates.close()
        logs = stack.work_dir / "logs"
        print(f"\nwarnings and errors in {logs}:", *log_problems(logs) or ["  none"], sep="\n")
    print("scan faults:", *timings, f"  client retries: {dict(gates.retries)}", sep="\n")

    # Each gate's answers for its key are one scan, replayed; one gate per ticket accepted.
    for (ticket, gate), answers in gates.seen.items():
        assert len({answer["id"] for answer in answers}) == 1, (ticket, gate, answers)
    accepted = Counter(
        ticket for (ticket, _), answer in gates.answers.items() if answer["result"] == "accepted"
    )
    assert accepted == dict.fromkeys(tickets, 1)
    for (_, _), answer in gates.answers.items():
        if answer["result"] == "rejected":
            assert answer["reason"] == "already_redeemed", answer

    mongo: MongoClient[dict[str, Any]] = MongoClient(stack.mongo_url)
    with mongo:
        db = mongo[stack.database]
        pass_ids = list(tickets.values())
        counts = {
            doc["_id"]: doc.get("redemption_count")
            for doc in db.passes.find({"_id": {"$in": pass_ids}}, {"redemption_count": 1})
        }
        assert counts == dict.fromkeys(pass_ids, 1)
        accepted_scans = Counter(
            doc["pass_id"]
            for doc in db.scans.find({"pass_id": {"$in": pass_ids}, "result": "accepted"})
        )
        assert accepted_scans == dict.fromkeys(pass_ids, 1)

        def redeemed() -> Counter[str]:
            query = {"pass_id": {"$in": pass_ids}, "type": "redeemed"}
            return Counter(doc["pass_id"] for doc in db.pass_events.find(query, {"pass_id": 1}))

        events = poll(redeemed, lambda found: len(found) == PASSES, timeout=120, message="events")
        assert events == dict.fromkeys(pass_ids, 1)
