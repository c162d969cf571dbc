"""A template rollout of 10,000 passes, each with one registered Apple device, on a local fake
APNs (HTTP/2): the whole stack under `tessera up`, driven over HTTP.

Run with `python -m bench.rollout [--passes 10000]`. It starts a fake APNs (tests/support/
fake_apns.py) trusting the development identity, then `tessera up` with its events service
pushing there, imports `--passes` passes with an import job, registers one device per pass
(written to the events service's `registrations` directly: a bench of the rollout, not of
10,000 registration requests), then PATCHes the template's design and measures from the PATCH
to the moment the last pass's `updated` event (recorded after its push) is in the store:
passes re-rendered and pushed per second. Then the single-process build rate from bench.pkpass
(3 s) and the ratio rollout : build (issue 12 target: >= 0.25). Results go to
bench/results/rollout.json.
"""

import argparse
import asyncio
import hashlib
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx2
from pymongo import AsyncMongoClient

from bench import commands, cpu
from bench.issue import scrape_commands
from bench.jobs import create_template, finished_job, rows
from bench.pkpass import (
    EVENT_DESIGN,
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
    clean_env,
    new_client,
    stop_stack,
    wait_for_ready,
)
from shared.apple_identity import ensure_dev_identity
from tessera.processes import free_port_block
from tests.support.fake_apns import FakeApns, running_fake_apns

PKPASS_SECONDS = 3.0
PASS_TYPE = "pass.dev.tessera"  # noqa: S105 - an identifier, not a secret
EVENT_TIMEOUT = 900.0


@contextmanager
def stack_pushing_to(work_dir: Path, fake: FakeApns) -> Iterator[Stack]:
    """`tessera up` whose events service pushes to `fake`."""
    data_dir = work_dir / "data"
    log_path = work_dir / "tessera-up.log"
    env = clean_env() | {
        "TESSERA_EVENTS_APNS_URL": fake.url,
        "TESSERA_EVENTS_APNS_CA_PATH": str(fake.server_ca_path),
    }
    argv = [sys.executable, "-m", "tessera.cli", "up", "--data-dir", str(data_dir)]
    argv += ["--host", HOST, "--port", str(free_port_block(4))]
    with log_path.open("ab") as log:
        proc = subprocess.Popen(
            argv,
            cwd=REPO_ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    try:
        yield wait_for_ready(proc, data_dir, log_path)
    finally:
        stop_stack(proc)


async def register_devices(stack: Stack, template_id: str) -> int:
    """One device registration per pass of the template, as the events service stores one."""
    mongo: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(stack.mongodb_url)
    try:
        db = mongo[DATABASE]
        now = datetime.now(UTC)
        documents = []
        async for doc in db["passes"].find({"template_id": template_id}):
            device = secrets.token_hex(16)
            key = "\n".join((device, PASS_TYPE, doc["serial_number"]))
            documents.append(
                {
                    "_id": hashlib.sha256(key.encode()).hexdigest(),
                    "device": hashlib.sha256(device.encode()).hexdigest(),
                    "pass_type": PASS_TYPE,
                    "serial_number": doc["serial_number"],
                    "pass_id": doc["_id"],
                    "account_id": doc["account_id"],
                    "mode": doc["mode"],
                    "push_token": secrets.token_hex(32),
                    "created_at": now,
                    "updated_at": now,
                }
            )
        await db["registrations"].insert_many(documents)
        return len(documents)
    finally:
        await mongo.close()


async def pushed_events(stack: Stack, job_id: str, expected: int) -> float:
    """When (monotonic) the store held `expected` pushed `updated` events of the rollout."""
    mongo: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(stack.mongodb_url)
    try:
        events = mongo[DATABASE]["pass_events"]
        query = {"type": "updated", "metadata.job_id": job_id}
        deadline = time.monotonic() + EVENT_TIMEOUT
        while await events.count_documents(query) < expected:
            if time.monotonic() > deadline:
                raise TimeoutError("updated events still missing")
            await asyncio.sleep(POLL_INTERVAL)
        pushed = await events.count_documents({**query, "metadata.devices_pushed": 1})
        if pushed != expected:
            raise RuntimeError(f"{expected - pushed} passes were not pushed to their device")
        return time.monotonic()
    finally:
        await mongo.close()


async def processed_job(client: httpx2.AsyncClient, job_id: str, passes: int) -> None:
    """Returns once the job has processed `passes` passes, or ended."""
    deadline = time.monotonic() + EVENT_TIMEOUT
    while True:
        response = await client.get(f"/v1/jobs/{job_id}")
        response.raise_for_status()
        job = response.json()
        if job["processed"] >= passes or job["status"] not in ("queued", "running"):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"job {job_id} did not process its passes: {job}")
        await asyncio.sleep(POLL_INTERVAL)


async def drive(stack: Stack, fake: FakeApns, passes: int) -> dict[str, Any]:
    async with new_client(stack, 4) as client:
        template_id = await create_template(client)
        body = {"type": "import_passes", "template_id": template_id, "rows": rows(passes, 0)}
        response = await client.post("/v1/jobs", json=body)
        response.raise_for_status()
        imported = await finished_job(client, response.json()["id"])
        assert imported["succeeded"] == passes, imported
        registered = await register_devices(stack, template_id)
        design = {**EVENT_DESIGN, "description": "Moved to Hall B"}
        cpu_before = cpu.stack_cpu(stack.proc.pid)
        commands_before = scrape_commands(stack)
        began = time.monotonic()
        response = await client.patch(f"/v1/templates/{template_id}", json={"design": design})
        response.raise_for_status()
        job_id = response.json()["rollout_job_id"]
        # The last pass's event is the rollout's end; the job itself succeeds only after its
        # closing sweep (TESSERA_ISSUER_ROLLOUT_SWEEP_SECONDS after the PATCH, docs/templates.md),
        # which finds nothing to do here: timed apart. The events are counted once every pass
        # is processed (counting them costs the store a scan).
        await processed_job(client, job_id, passes)
        pushed_at = await pushed_events(stack, job_id, passes)
        job = await finished_job(client, job_id)
        finished = time.monotonic()
    cpu_ms = cpu.per_pass_ms(cpu_before, cpu.stack_cpu(stack.proc.pid), passes)
    spent = scrape_commands(stack).minus(commands_before)
    seconds = pushed_at - began
    return {
        "passes": passes,
        "registered_devices": registered,
        "job_status": job["status"],
        "apns_pushes": len(fake.pushes()),
        "job_seconds": round(finished - began, 2),
        "seconds": round(seconds, 2),
        "passes_per_second": round(passes / seconds, 1),
        # CPU milliseconds per pass by process: what caps the rate on a 2-CPU machine.
        "cpu_ms_per_pass": cpu_ms,
        # MongoDB commands per pass by service and by command (bench/commands.py).
        "commands_per_pass": commands.per_request(spent, passes),
        "commands_by_name": commands.by_command(spent, passes),
    }


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.rollout", description=__doc__)
    parser.add_argument("--passes", type=int, default=10_000, help="passes of the template")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="tessera-bench-rollout-") as tmp:
        work_dir = Path(tmp)
        # The fake APNs trusts the identity `tessera up` will sign with: made first.
        ensure_dev_identity(work_dir / "data" / "signing")
        signing = work_dir / "data" / "signing"
        with (
            running_fake_apns(signing / "root-ca.pem", work_dir) as fake,
            stack_pushing_to(work_dir, fake) as stack,
        ):
            run = asyncio.run(drive(stack, fake, args.passes))
    build = run_build_benchmark(PKPASS_SECONDS)
    print(stats_table(build))
    print("CPU ms per pass by process:", run["cpu_ms_per_pass"])
    print("MongoDB commands per pass:\n" + commands.table(run["commands_per_pass"]))
    print("by command:", dict(list(run["commands_by_name"].items())[:12]))
    ratio = round(run["passes_per_second"] / build.builds_per_second, 3)
    print(
        f"rollout of {run['passes']} passes: job succeeded after {run['job_seconds']} s, all "
        f"pushed and recorded in {run['seconds']} s: {run['passes_per_second']} passes/s, "
        f"{ratio} x the build rate ({build.builds_per_second:.0f}/s)"
    )
    path = write_results(
        "rollout",
        {"machine": machine_facts(), "run": run, "pkpass": asdict(build), "ratio_to_build": ratio},
    )
    print(f"written to {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
