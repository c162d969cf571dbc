"""The whole Tessera stack for end-to-end tests: real nats-server, real MongoDB-wire store,
the four services as real processes, each stack on a nats-server and a database of its own.
Modules that need nothing special share one default stack (tests/conftest.py); `for_module`
gives each of them a view whose `log_text` starts where that module began.

Each service runs `replicas` processes (TESSERA_TEST_REPLICAS, default 2), sharing the service's
port with SO_REUSEPORT and each on a port of its own, as `tessera up --replicas` runs them, so
every end-to-end test runs against several replicas of every service.
"""

import dataclasses
import os
import random
import secrets
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
from cryptography.fernet import Fernet

from tessera.processes import (
    BLOCK_LOW,
    PORT_OFFSETS,
    SERVICES,
    Child,
    Replica,
    base_env,
    ephemeral_low,
    free_port,
    port_free,
    ports_needed,
    replicas_of,
    service_argv,
    stop_all,
    wait_ready,
)

START_TIMEOUT = 60.0
ADMIN_GUESSES = 50


def replicas_from_env() -> int:
    """Processes per service in end-to-end stacks: TESSERA_TEST_REPLICAS, default 2."""
    return int(os.environ.get("TESSERA_TEST_REPLICAS", "2"))


@dataclass
class Account:
    id: str
    test_key: str
    live_key: str

    def headers(self, mode: str = "test") -> dict[str, str]:
        key = self.test_key if mode == "test" else self.live_key
        return {"Authorization": f"Bearer {key}"}


@dataclass
class Stack:
    nats_url: str
    mongo_url: str
    database: str
    work_dir: Path
    host: str = "127.0.0.1"
    admin_token: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    webhooks_key: str = field(default_factory=lambda: Fernet.generate_key().decode())
    api_port: int = 0
    extra_env: dict[str, str] = field(default_factory=dict)
    replicas: int = 1
    children: dict[str, Child] = field(default_factory=dict)
    # Where `log_text` starts reading each process's log (see `for_module`); 0 when absent.
    log_marks: dict[str, int] = field(default_factory=dict)

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.api_port}"

    @property
    def signing_dir(self) -> Path:
        return self.work_dir / "signing"

    def env(self) -> dict[str, str]:
        env = base_env()
        env.update(
            {
                "TESSERA_ENVIRONMENT": "test",
                "TESSERA_NATS_URL": self.nats_url,
                "TESSERA_MONGODB_URL": self.mongo_url,
                "TESSERA_MONGODB_DATABASE": self.database,
                "TESSERA_HOST": self.host,
                "TESSERA_BASE_URL": self.base_url,
                "TESSERA_SITE_URL": self.base_url,
                "TESSERA_WALLET_URL": f"http://{self.host}:{self.api_port + 1}",
                "TESSERA_ADMIN_TOKEN": self.admin_token,
                # Modules try many wrong admin tokens from loopback; test_public_edge.py
                # shows the limit with an address of its own.
                "TESSERA_API_ADMIN_GUESSES_PER_WINDOW": str(ADMIN_GUESSES),
                "TESSERA_DATA_DIR": str(self.work_dir),
                "TESSERA_ISSUER_OUTBOX_POLL_SECONDS": "0.5",
                # A rollout's sweep (docs/templates.md) 4 s after its design change, not 20:
                # tests that wait for a rollout need not wait for the production margin. The
                # issuer refuses a sweep sooner than the max prepared age + 1.5 s (a pass made
                # from the old design meanwhile could miss the rollout), so that age is 2 s.
                "TESSERA_ISSUER_MAX_PREPARED_AGE_SECONDS": "2",
                "TESSERA_ISSUER_ROLLOUT_SWEEP_SECONDS": "4",
                "TESSERA_WEBHOOKS_SECRET_KEY": self.webhooks_key,
                # Test receivers listen on loopback, which production refuses (SSRF guard).
                "TESSERA_WEBHOOK_ALLOW_PRIVATE_NETWORKS": "true",
            }
        )
        for name in SERVICES:
            env[f"TESSERA_{name.upper()}_PORT"] = str(self.api_port + PORT_OFFSETS[name])
        return env | self.extra_env

    def members(self, service: str) -> list[Replica]:
        """The replicas `start` runs of a service."""
        return replicas_of(service, self.replicas, self.api_port)

    def replica_names(self, service: str) -> list[str]:
        """Its process names ("issuer", "issuer-2", ...), also the names of their log files."""
        return [member.name for member in self.members(service)]

    def pids(self, service: str) -> list[int]:
        """The process ids of the service's running replicas (to read /proc/<pid>/status)."""
        children = (self.children.get(name) for name in self.replica_names(service))
        return [child.proc.pid for child in children if child and child.proc and child.alive()]

    @contextmanager
    def paused(self, service: str) -> Iterator[None]:
        """Every replica of the service stopped (SIGSTOP) for the block: what is sent to it
        waits, unread, until they continue (SIGCONT) at its end."""
        pids = self.pids(service)
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        try:
            yield
        finally:
            for pid in pids:
                os.kill(pid, signal.SIGCONT)

    def _log_path(self, name: str) -> Path:
        return self.work_dir / "logs" / f"{name}.log"

    def _logged(self, name: str, *, whole: bool = False) -> str:
        """What process `name` logged since the module began using the stack (`for_module`),
        or with `whole` since it first started; "" if it has no log."""
        path = self._log_path(name)
        if not path.exists():
            return ""
        with path.open("rb") as log:
            log.seek(0 if whole else self.log_marks.get(name, 0))
            return log.read().decode(errors="replace")

    def log_text(self, service: str, *, whole: bool = False) -> str:
        """The logs of every replica of a service, one after the other: what they wrote since
        the module began using the stack (`for_module`), or with `whole` everything since they
        first started, which on a shared stack includes what other modules made them log."""
        return "".join(self._logged(name, whole=whole) for name in self.replica_names(service))

    def complaints(self, most: int = 40) -> list[str]:
        """The last `most` warning and error lines every process of the stack logged since the
        module began using it: what a failed test's report shows (tests/conftest.py), so that
        a failure in CI says what the services saw."""
        lines = [
            f"{name}: {line[:600]}"
            for name in sorted(self.children)
            for line in self._logged(name).splitlines()
            if '"level": "warning"' in line or '"level": "error"' in line
        ]
        return lines[-most:]

    def for_module(self) -> "Stack":
        """This stack as one test module sees it: the same processes, store and settings, with
        `log_text` reading only what the processes log from now on."""
        paths = {name: self._log_path(name) for name in self.children}
        marks = {name: path.stat().st_size for name, path in paths.items() if path.exists()}
        return dataclasses.replace(self, log_marks=marks)

    def start(self, *names: str) -> None:
        """Start every replica of the named services (all services by default)."""
        env = self.env()
        started: list[tuple[Replica, Child]] = []
        for name in names or SERVICES:
            for member in self.members(name):
                log_path = self.work_dir / "logs" / f"{member.name}.log"
                child = Child(member.name, service_argv(name), env | member.env(), log_path)
                child.start()
                self.children[member.name] = child
                started.append((member, child))
        deadline = time.monotonic() + START_TIMEOUT
        for member, child in started:
            port = member.port(self.api_port)
            wait_ready(f"http://{self.host}:{port}/readyz", deadline, child)

    def start_replica(self, name: str, replica: str) -> None:
        """Start one more process of service `name` on a free port, known as `replica` (for
        `kill` and `stop`), to run several replicas of a service against the same stores."""
        assert replica not in self.children, f"{replica} is already a process of this stack"
        port = free_port(self.host)
        env = self.env() | {f"TESSERA_{name.upper()}_PORT": str(port)}
        child = Child(replica, service_argv(name), env, self.work_dir / "logs" / f"{replica}.log")
        child.start()
        self.children[replica] = child
        deadline = time.monotonic() + START_TIMEOUT
        wait_ready(f"http://{self.host}:{port}/readyz", deadline, child)

    def kill(self, name: str) -> None:
        """SIGKILL a service (every replica of it) or one named process, as a crash would."""
        targets = self.replica_names(name) if name in SERVICES else [name]
        for target in targets:
            self.children[target].kill()
        for target in targets:
            self.children[target].wait(5.0)

    def stop(self) -> None:
        stop_all(list(self.children.values()))

    def client(self, **kwargs: Any) -> httpx2.Client:
        return httpx2.Client(base_url=self.base_url, timeout=30.0, **kwargs)

    def admin_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.admin_token}"}

    def new_account(self, plan: str = "free") -> Account:
        with self.client() as client:
            response = client.post(
                "/admin/v1/accounts",
                json={"name": f"acct-{secrets.token_hex(3)}", "plan": plan},
                headers=self.admin_headers(),
            )
        assert response.status_code == 201, response.text
        body = response.json()
        return Account(body["id"], body["api_keys"]["test"], body["api_keys"]["live"])


def _port_block(count: int, host: str = "127.0.0.1") -> int:
    """The first of `count` consecutive free ports below the ephemeral range, as
    tessera.processes.free_port_block draws them, but from this pytest-xdist worker's own share
    of that range: two workers starting stacks at once cannot draw overlapping blocks between
    the check and the services' binds."""
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw"))
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    share = (ephemeral_low() - BLOCK_LOW) // workers
    low = BLOCK_LOW + worker * share
    while True:
        first = random.randint(low, low + share - count)
        if all(port_free(first + i, host) for i in range(count)):
            return first


def new_stack(nats_url: str, mongo_url: str, work_dir: Path, replicas: int | None = None) -> Stack:
    """A stack on free ports; `replicas` processes per service (default: replicas_from_env())."""
    count = replicas_from_env() if replicas is None else replicas
    return Stack(
        nats_url=nats_url,
        mongo_url=mongo_url,
        database=f"t_{secrets.token_hex(6)}",
        work_dir=work_dir,
        api_port=_port_block(ports_needed(count)),
        replicas=count,
    )


@contextmanager
def serving(stack: Stack) -> Iterator[Stack]:
    """Run the stack's services for the block, and stop them whatever happens."""
    try:
        stack.start()
        yield stack
    finally:
        stack.stop()
