"""Bulk issuance through an import job: the whole stack under `tessera up`, driven over HTTP.

Run with `python -m bench.jobs [--passes 10000]`. It starts `tessera up` (bench/stack.py),
creates one eventTicket template, warms up with a small import, then imports `--passes` rows
with POST /v1/jobs, first with the one issuer of `tessera up`, then again with a second issuer
process started beside it (same store, NATS and signing identity). For each run: passes/s from
the request until the job finished (upload included) and from the job's start to its end, and
the event lag: how long after the job finished every `created` event of its passes was
recorded (counted in the store, not through the API, so the count costs the stack nothing).
Then the single-process build rate from bench.pkpass (3 s) and the ratio import : build.
Numbers go to bench/results/jobs.json.
"""

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

import httpx2
from pymongo import AsyncMongoClient

from bench import commands, cpu
from bench.issue import scrape_commands
from bench.pkpass import (
    EVENT_DESIGN,
    BuildStats,
    format_table,
    machine_facts,
    run_build_benchmark,
    stats_table,
    write_results,
)
from bench.stack import (
    DATABASE,
    HOST,
    POLL_INTERVAL,
    REPO_ROOT,
    Stack,
    child_process,
    clean_env,
    new_client,
    running_stack,
)
from tessera.processes import free_port

PKPASS_SECONDS = 3.0
WARMUP_ROWS = 200
JOB_TIMEOUT = 900.0
EVENT_TIMEOUT = 300.0
READY_TIMEOUT = 60.0


@dataclass
class RunResult:
    issuers: int
    passes: int
    succeeded: int
    upload_seconds: float
    seconds: float  # from sending the request to the job's end
    work_seconds: float  # from the job's start to its end, as the job records them
    passes_per_second: float
    work_passes_per_second: float
    event_lag_seconds: float
    # With one issuer (the second issuer runs outside `tessera up`, so it is not counted):
    # CPU milliseconds per pass by process, and MongoDB commands per pass by service.
    cpu_ms_per_pass: dict[str, float] | None = None
    commands_per_pass: dict[str, dict[str, float]] | None = None


def rows(count: int, first: int) -> list[dict[str, Any]]:
    return [
        {
            "holder_name": f"Holder {n}",
            "holder_email": f"holder{n}@example.com",
            "field_values": {"seat": f"R{n // 20}-{n % 20}"},
        }
        for n in range(first, first + count)
    ]


async def create_template(client: httpx2.AsyncClient) -> str:
    body = {"name": "Bench", "type": "event", "apple_style": "eventTicket", "design": EVENT_DESIGN}
    response = await client.post("/v1/templates", json=body)
    response.raise_for_status()
    template_id: str = response.json()["id"]
    return template_id


async def finished_job(client: httpx2.AsyncClient, job_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + JOB_TIMEOUT
    while True:
        response = await client.get(f"/v1/jobs/{job_id}")
        response.raise_for_status()
        job: dict[str, Any] = response.json()
        if job["status"] in ("succeeded", "failed", "canceled"):
            return job
        if time.monotonic() > deadline:
            raise TimeoutError(f"job {job_id} did not finish: {job}")
        await asyncio.sleep(POLL_INTERVAL)


async def created_events(stack: Stack, expected: int) -> float:
    """When (monotonic) the store held `expected` created events of the account."""
    mongo: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(stack.mongodb_url)
    try:
        events = mongo[DATABASE]["pass_events"]
        query = {"account_id": stack.account_id, "type": "created"}
        deadline = time.monotonic() + EVENT_TIMEOUT
        while await events.count_documents(query) < expected:
            if time.monotonic() > deadline:
                raise TimeoutError("created events still missing")
            await asyncio.sleep(POLL_INTERVAL)
        return time.monotonic()
    finally:
        await mongo.close()


def _seconds(job: dict[str, Any], start: str, end: str) -> float:
    begun = datetime.fromisoformat(job[start].replace("Z", "+00:00"))
    ended = datetime.fromisoformat(job[end].replace("Z", "+00:00"))
    return max((ended - begun).total_seconds(), 1e-3)


async def import_once(
    stack: Stack, client: httpx2.AsyncClient, template_id: str, count: int, first: int
) -> tuple[dict[str, Any], float, float, float]:
    """Import `count` rows; the finished job, the upload time, the wall time, its end."""
    body = {"type": "import_passes", "template_id": template_id, "rows": rows(count, first)}
    began = time.monotonic()
    response = await client.post("/v1/jobs", json=body)
    if response.status_code != 202:
        raise RuntimeError(f"import refused: {response.status_code} {response.text[:300]}")
    uploaded = time.monotonic()
    job = await finished_job(client, response.json()["id"])
    ended = time.monotonic()
    return job, uploaded - began, ended - began, ended


async def measure(
    stack: Stack, template_id: str, count: int, first: int, issuers: int, issued_before: int
) -> RunResult:
    cpu_before = cpu.stack_cpu(stack.proc.pid)
    commands_before = scrape_commands(stack)
    async with new_client(stack, 4) as client:
        job, upload, wall, ended = await import_once(stack, client, template_id, count, first)
    recorded = await created_events(stack, issued_before + job["succeeded"])
    cpu_ms = cpu.per_pass_ms(cpu_before, cpu.stack_cpu(stack.proc.pid), count)
    spent = scrape_commands(stack).minus(commands_before)
    work = _seconds(job, "started_at", "finished_at")
    return RunResult(
        issuers=issuers,
        passes=count,
        succeeded=job["succeeded"],
        upload_seconds=round(upload, 2),
        seconds=round(wall, 2),
        work_seconds=round(work, 2),
        passes_per_second=round(job["succeeded"] / wall, 1),
        work_passes_per_second=round(job["succeeded"] / work, 1),
        event_lag_seconds=round(max(0.0, recorded - ended), 2),
        cpu_ms_per_pass=cpu_ms if issuers == 1 else None,
        commands_per_pass=commands.per_request(spent, count) if issuers == 1 else None,
    )


@contextmanager
def second_issuer(stack: Stack, work_dir: Path) -> Iterator[None]:
    """One more issuer process on the stack's store, NATS and signing identity."""
    port = free_port(HOST)
    env = clean_env() | {
        "TESSERA_NATS_URL": _ready(stack)["nats_url"],
        "TESSERA_MONGODB_URL": stack.mongodb_url,
        "TESSERA_HOST": HOST,
        "TESSERA_BASE_URL": stack.base_url,
        "TESSERA_SITE_URL": _ready(stack)["site_url"],
        "TESSERA_WALLET_URL": _ready(stack)["wallet_url"],
        "TESSERA_DATA_DIR": str(stack.data_dir),
        "TESSERA_ISSUER_PORT": str(port),
    }
    log_path = work_dir / "issuer-2.log"
    with log_path.open("ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "services.issuer"],
            cwd=REPO_ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    failure = f"the second issuer did not start (see {log_path})"
    ready = partial(_answers, f"http://{HOST}:{port}/readyz")
    with child_process(proc, ready, failure, READY_TIMEOUT, stop_seconds=15):
        yield


def _ready(stack: Stack) -> dict[str, str]:
    ready: dict[str, str] = json.loads((stack.data_dir / "ready.json").read_text())
    return ready


def _answers(url: str) -> bool:
    try:
        return httpx2.get(url, timeout=2.0).status_code == 200
    except httpx2.HTTPError:
        return False


async def drive(stack: Stack, passes: int, work_dir: Path) -> list[RunResult]:
    async with new_client(stack, 4) as client:
        template_id = await create_template(client)
        warmup, *_ = await import_once(stack, client, template_id, WARMUP_ROWS, 0)
    issued = warmup["succeeded"]
    results = [await measure(stack, template_id, passes, 10**6, 1, issued)]
    print(f"one issuer: {results[-1].passes_per_second} passes/s", flush=True)
    print("CPU ms per pass by process:", results[-1].cpu_ms_per_pass, flush=True)
    print("MongoDB commands per pass:\n" + commands.table(results[-1].commands_per_pass or {}))
    issued += results[-1].succeeded
    with second_issuer(stack, work_dir):
        results.append(await measure(stack, template_id, passes, 2 * 10**6, 2, issued))
    print(f"two issuers: {results[-1].passes_per_second} passes/s", flush=True)
    return results


def table(results: Sequence[RunResult], build: BuildStats) -> str:
    headers = ["issuers", "passes", "upload s", "total s", "passes/s", "worker passes/s",
               "x build", "event lag s"]  # fmt: skip
    return format_table(
        headers,
        [
            [
                str(r.issuers),
                str(r.succeeded),
                f"{r.upload_seconds:.1f}",
                f"{r.seconds:.1f}",
                f"{r.passes_per_second:.1f}",
                f"{r.work_passes_per_second:.1f}",
                f"{r.passes_per_second / build.builds_per_second:.3f}",
                f"{r.event_lag_seconds:.2f}",
            ]
            for r in results
        ],
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.jobs", description=__doc__)
    parser.add_argument("--passes", type=int, default=10_000, help="rows per import")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="tessera-bench-jobs-") as tmp:
        work_dir = Path(tmp)
        with running_stack(work_dir) as stack:
            results = asyncio.run(drive(stack, args.passes, work_dir))
    build = run_build_benchmark(PKPASS_SECONDS)
    print(stats_table(build))
    print(table(results, build))
    ratios = {
        f"{r.issuers}_issuer": round(r.passes_per_second / build.builds_per_second, 3)
        for r in results
    }
    path = write_results(
        "jobs",
        {
            "machine": machine_facts(),
            "passes": args.passes,
            "runs": [asdict(r) for r in results],
            "pkpass": asdict(build),
            "ratio_to_build": ratios,
        },
    )
    print(f"ratio import / build: {ratios}; written to {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
