"""`tessera up` for the benchmarks: a fresh data dir, free ports, 127.0.0.1, always stopped.

Shared by bench.issue, bench.webhooks, bench.reads and bench.profile. The stack runs without
the caller's TESSERA_* variables; `running_stack` yields once DIR/ready.json exists and stops
the stack with SIGTERM (then SIGKILL) whatever happens.
"""

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx2

from tessera.processes import free_port_block, log_tail

HOST = "127.0.0.1"
REPO_ROOT = Path(__file__).resolve().parent.parent
START_TIMEOUT = 120.0
STOP_TIMEOUT = 15.0
REQUEST_TIMEOUT = 60.0
POLL_INTERVAL = 0.05
# `tessera up` runs the services with the default database name.
DATABASE = "tessera"


@dataclass(frozen=True)
class Stack:
    """A running `tessera up`: its process, where it answers, the dev account and its key."""

    proc: subprocess.Popen[bytes]
    base_url: str
    test_key: str
    account_id: str
    mongodb_url: str
    data_dir: Path


# The development account is on the free plan (100 requests/s); a benchmark measures the
# service, not the rate limiter, so the bench stack's free plan allows far more.
BENCH_PLANS = {
    "free": {
        "live_keys": False,
        "rate_limit": 1_000_000,
        "rate_window_seconds": 1,
        "monthly_passes": {"test": 10_000_000, "live": 0},
    }
}


def clean_env() -> dict[str, str]:
    """The caller's environment without any TESSERA_* variable, plus the bench plan table."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("TESSERA_")}
    env["PYTHONUNBUFFERED"] = "1"
    env["TESSERA_API_PLANS"] = json.dumps(BENCH_PLANS)
    return env


def start_stack(data_dir: Path, port: int, log_path: Path) -> subprocess.Popen[bytes]:
    argv = [
        sys.executable,
        "-m",
        "tessera.cli",
        "up",
        "--data-dir",
        str(data_dir),
        "--host",
        HOST,
        "--port",
        str(port),
    ]
    with log_path.open("ab") as log:
        return subprocess.Popen(
            argv,
            cwd=REPO_ROOT,
            env=clean_env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )


def wait_for_ready(proc: subprocess.Popen[bytes], data_dir: Path, log_path: Path) -> Stack:
    """Poll for DIR/ready.json until START_TIMEOUT; fail early if `tessera up` exits."""
    ready_file = data_dir / "ready.json"
    deadline = time.monotonic() + START_TIMEOUT
    while not ready_file.exists():
        if proc.poll() is not None:
            raise RuntimeError(f"tessera up exited with {proc.returncode}:\n{log_tail(log_path)}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"no ready.json after {START_TIMEOUT:g} s:\n{log_tail(log_path)}")
        time.sleep(POLL_INTERVAL)
    ready: dict[str, str] = json.loads(ready_file.read_text())
    account: dict[str, str] = json.loads((data_dir / "dev-account.json").read_text())
    return Stack(
        proc=proc,
        base_url=ready["base_url"],
        test_key=account["test_key"],
        account_id=account["account_id"],
        mongodb_url=ready["mongodb_url"],
        data_dir=data_dir,
    )


def stop_stack(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, wait up to STOP_TIMEOUT, then SIGKILL."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        print(f"tessera up did not stop within {STOP_TIMEOUT:g} s; killing it", file=sys.stderr)
        proc.kill()
        proc.wait(timeout=STOP_TIMEOUT)


@contextmanager
def running_stack(work_dir: Path) -> Iterator[Stack]:
    """`tessera up` on a fresh data dir under `work_dir`; always stopped on exit."""
    data_dir = work_dir / "data"
    log_path = work_dir / "tessera-up.log"
    port = free_port_block(4)
    started = time.monotonic()
    proc = start_stack(data_dir, port, log_path)
    try:
        stack = wait_for_ready(proc, data_dir, log_path)
        print(f"stack up at {stack.base_url} in {time.monotonic() - started:.1f} s", flush=True)
        yield stack
    finally:
        stop_stack(proc)
        print(f"stack stopped (exit code {proc.returncode})", flush=True)


@contextmanager
def child_process(
    proc: subprocess.Popen[bytes],
    ready: Callable[[], bool],
    failure: str,
    start_seconds: float,
    stop_seconds: float = 10.0,
) -> Iterator[subprocess.Popen[bytes]]:
    """A process the bench started (a second issuer, the webhook receiver): waited for until
    `ready()`, else RuntimeError(`failure`); terminated (killed if it lingers) at the end."""
    try:
        deadline = time.monotonic() + start_seconds
        while not ready():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(failure)
            time.sleep(POLL_INTERVAL)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=stop_seconds)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def new_client(stack: Stack, concurrency: int) -> httpx2.AsyncClient:
    """An HTTP client for the api with the dev test key and `concurrency` connections."""
    limits = httpx2.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    return httpx2.AsyncClient(
        base_url=stack.base_url,
        headers={"Authorization": f"Bearer {stack.test_key}"},
        timeout=REQUEST_TIMEOUT,
        limits=limits,
        trust_env=False,
    )
