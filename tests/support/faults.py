"""Fault injection (`make test-faults`): backing servers that can be restarted in place, and a
steady load of pass creations and updates that retries like a real client.

A restart of nats-server or the store is the same server again: same port, same data
directory, so what it had persisted is there when it comes back. The load sends every write
with an Idempotency-Key and, when a request fails in a retryable way, puts it aside and sends
the same key again later (with backoff, until a deadline) while it carries on with new work;
so one key stuck behind a dead issuer's transaction does not stall the rest.
"""

import json
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import httpx2

from tessera.processes import Child, base_env, free_port, mongo_argv, nats_argv, wait_tcp
from tests.support.polling import poll
from tests.support.stack import Account, Stack

HOST = "127.0.0.1"
# Retryable answers besides 5xx and transport errors: the first request with the key is still
# running (or was cut off by a crash and its lock has not run out yet), or the rate limit.
RETRYABLE_CONFLICTS = {"idempotency_request_in_progress"}
# The 500 codes the services give to a failure a retry resolves (docs/architecture.md).
RETRYABLE_500_CODES = {"write_conflict", "timeout", "service_unavailable"}


@dataclass
class Server:
    """A backing server on a fixed port with a persistent data directory."""

    name: str
    child: Child
    port: int
    url: str
    start_timeout: float = 30.0
    restarts: int = 0

    def start(self) -> None:
        self.child.start()
        wait_tcp(HOST, self.port, time.monotonic() + self.start_timeout)

    def stop(self, *, kill: bool = False) -> None:
        """SIGTERM (a clean shutdown) or SIGKILL (a crash), and wait for the exit."""
        if kill:
            self.child.kill()
        else:
            self.child.terminate()
        if not self.child.wait(15.0):
            self.child.kill()
            self.child.wait(5.0)

    def restart(self, *, kill: bool = False) -> None:
        self.stop(kill=kill)
        self.start()
        self.restarts += 1


def nats_server(work_dir: Path) -> Server:
    port = free_port(HOST)
    argv = nats_argv(HOST, port, work_dir / "js")
    child = Child("nats", argv, base_env(), work_dir / "nats.log")
    return Server("nats", child, port, f"nats://{HOST}:{port}")


def store_server(work_dir: Path) -> Server:
    port = free_port(HOST)
    # As `tessera up` runs it: the services' writes ask for j:true (shared/mongo.py), which
    # is what keeps acknowledged writes through the store's kill -9.
    argv = mongo_argv(HOST, port, work_dir / "data")
    child = Child("store", argv, base_env(), work_dir / "store.log")
    return Server("store", child, port, f"mongodb://{HOST}:{port}/?directConnection=true")


@contextmanager
def running(server: Server) -> Iterator[Server]:
    server.start()
    try:
        yield server
    finally:
        server.stop()


Outcome = Literal["pending", "ok", "failed", "rejected"]


@dataclass
class Op:
    """One write as a client sees it: one Idempotency-Key, sent until it settles."""

    kind: Literal["create", "update"]
    key: str
    method: str
    path: str
    body: dict[str, Any]
    deadline: float
    pass_id: str | None = None  # the pass updated, or the pass a create returned
    attempts: int = 0
    next_try: float = 0.0
    outcome: Outcome = "pending"
    finished_at: float = 0.0
    last_error: str = ""


@dataclass
class Load:
    """Client threads creating passes of one template and updating the passes they created."""

    stack: Stack
    account: Account
    template_id: str
    workers: int = 3
    # Writes a worker keeps aside for retrying before it stops starting new ones: a client's
    # bounded concurrency, so an outage does not turn into a growing pile of new writes.
    max_waiting: int = 3
    op_deadline_seconds: float = 100.0
    pace_seconds: float = 0.05
    request_timeout_seconds: float = 30.0
    ops: list[Op] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)  # retryable answers, by kind
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _no_new_work: threading.Event = field(default_factory=threading.Event)
    _abort: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)

    def start(self) -> None:
        for number in range(self.workers):
            thread = threading.Thread(target=self._work, args=(number,), name=f"load-{number}")
            thread.start()
            self._threads.append(thread)

    def finish(self, timeout: float) -> None:
        """Stop starting new writes; wait for the ones being retried to settle."""
        self._no_new_work.set()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        if any(thread.is_alive() for thread in self._threads):
            self.abort()
            raise AssertionError(f"the load did not settle within {timeout}s")

    def abort(self) -> None:
        self._no_new_work.set()
        self._abort.set()
        for thread in self._threads:
            thread.join(self.request_timeout_seconds + 5)

    def settled(self, kind: str, outcome: Outcome, after: float = 0.0) -> list[Op]:
        with self._lock:
            return [
                op
                for op in self.ops
                if op.kind == kind and op.outcome == outcome and op.finished_at >= after
            ]

    def summary(self) -> list[str]:
        """The clients' side of the counts."""
        with self._lock:
            creates = Counter(op.outcome for op in self.ops if op.kind == "create")
            updates = Counter(op.outcome for op in self.ops if op.kind == "update")
            errors = ", ".join(f"{label} x{n}" for label, n in self.errors.most_common())
        return [
            f"passes issued: {creates['ok']} ok (2xx), {creates['failed']} failed after "
            f"retries, {creates['rejected']} rejected",
            f"updates: {updates['ok']} ok (2xx), {updates['failed']} failed after retries, "
            f"{updates['rejected']} rejected",
            f"client requests retried: {self.retries}; answers that made a client retry: "
            + (errors or "none"),
        ]

    @property
    def retries(self) -> int:
        with self._lock:
            return sum(max(0, op.attempts - 1) for op in self.ops)

    def _work(self, number: int) -> None:
        waiting: list[Op] = []  # writes put aside to be sent again
        mine: list[str] = []  # passes this worker created
        sent = 0
        with httpx2.Client(
            base_url=self.stack.base_url,
            headers=self.account.headers(),
            timeout=self.request_timeout_seconds,
        ) as client:
            while not self._abort.is_set():
                now = time.monotonic()
                due = min(waiting, key=lambda op: op.next_try, default=None)
                if due is not None and due.next_try <= now:
                    waiting.remove(due)
                    self._send(client, due, waiting, mine)
                elif self._no_new_work.is_set() or len(waiting) >= self.max_waiting:
                    if due is None:
                        return
                    self._abort.wait(due.next_try - now)
                else:
                    sent += 1
                    self._send(client, self._new_op(number, sent, mine), waiting, mine)
                    self._abort.wait(self.pace_seconds)

    def _new_op(self, number: int, sent: int, mine: list[str]) -> Op:
        key = f"w{number}-{sent}"
        deadline = time.monotonic() + self.op_deadline_seconds
        body: dict[str, Any]
        if mine and sent % 2 == 0:
            pass_id = random.choice(mine)
            body = {"field_values": {"gate": key}}
            op = Op("update", key, "PATCH", f"/v1/passes/{pass_id}", body, deadline, pass_id)
        else:
            body = {"template_id": self.template_id, "holder_name": key}
            op = Op("create", key, "POST", "/v1/passes", body, deadline)
        with self._lock:
            self.ops.append(op)
        return op

    def _send(self, client: httpx2.Client, op: Op, waiting: list[Op], mine: list[str]) -> None:
        op.attempts += 1
        try:
            response = client.request(
                op.method, op.path, json=op.body, headers={"Idempotency-Key": op.key}
            )
        except httpx2.TransportError as exc:
            self._retry_later(op, waiting, type(exc).__name__)
            return
        if response.status_code == 200:
            if op.kind == "create":
                op.pass_id = response.json()["id"]
                mine.append(op.pass_id)
            self._settle(op, "ok")
            return
        error = _error_of(response)
        label = f"{response.status_code} {error.get('code')}"
        retryable = (
            response.status_code >= 500
            or response.status_code == 429
            or (response.status_code == 409 and error.get("code") in RETRYABLE_CONFLICTS)
        )
        if retryable:
            self._retry_later(op, waiting, label)
        else:
            op.last_error = f"{label}: {response.text[:300]}"
            self._settle(op, "rejected")

    def _retry_later(self, op: Op, waiting: list[Op], label: str) -> None:
        with self._lock:
            self.errors[label] += 1
        op.last_error = label
        now = time.monotonic()
        if now >= op.deadline:
            self._settle(op, "failed")
            return
        op.next_try = now + min(2.0, 0.1 * 2 ** min(op.attempts, 5))
        waiting.append(op)

    def _settle(self, op: Op, outcome: Outcome) -> None:
        with self._lock:
            op.outcome = outcome
            op.finished_at = time.monotonic()


def _error_of(response: httpx2.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {}
    error = body.get("error") if isinstance(body, dict) else None
    return error if isinstance(error, dict) else {}


def log_problems(logs_dir: Path) -> list[str]:
    """The services' log lines at warning or above, counted by service, message and the last
    line of the traceback: what a reader of a failed run looks at first."""
    seen: Counter[str] = Counter()
    for path in sorted(logs_dir.glob("*.log")):
        for line in path.read_text(errors="replace").splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if not isinstance(entry, dict) or entry.get("level") in ("debug", "info"):
                continue
            trace = str(entry.get("exc", "")).strip().splitlines()
            cause = f" | {trace[-1][:200]}" if trace else ""
            seen[f"{path.stem} {entry.get('level')} {entry.get('msg', '')[:200]}{cause}"] += 1
    return [f"  {count} x {what}" for what, count in seen.most_common()]


def replicas_ready(stack: Stack, names: list[str], service: str = "issuer") -> bool:
    """Every named replica of `service` answers /readyz 200."""
    with httpx2.Client(timeout=2.0) as client:
        for member in stack.members(service):
            if member.name not in names:
                continue
            try:
                url = f"http://{stack.host}:{member.port(stack.api_port)}/readyz"
                if client.get(url).status_code != 200:
                    return False
            except httpx2.HTTPError:
                return False
    return True


def kill_and_restart(
    stack: Stack,
    names: list[str],
    service: str = "issuer",
    when_dead: Callable[[], None] | None = None,
) -> None:
    """kill -9 the named replicas of `service` together, start them again, wait until ready.
    `when_dead` runs once they are all dead and before they start: to read what they left."""
    for name in names:
        stack.children[name].kill()
    for name in names:
        stack.children[name].wait(5.0)
    if when_dead is not None:
        when_dead()
    for name in names:
        stack.children[name].start()
    poll(
        lambda: replicas_ready(stack, names, service),
        timeout=60,
        message=f"{names} ready again",
    )
