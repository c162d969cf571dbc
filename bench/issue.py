"""End-to-end issuing throughput: the whole stack under `tessera up`, driven over HTTP.

Run with `python -m bench.issue [--requests 300] [--concurrency 1,8,32]`. It starts
`tessera up` on a fresh data directory and free ports (127.0.0.1 only, without the caller's
TESSERA_* variables), reads the development test key, creates one eventTicket template, and
for each concurrency level issues N passes with POST /v1/passes, timing every request. It then
polls GET /v1/events until a `created` event exists for every issued pass and reports how long
that took after the last response (the event-recording lag). The stack is stopped with SIGTERM
in every case. Finally the single-process build rate from bench.pkpass (3 s) is measured and the
ratio end-to-end passes/s : pkpass builds/s printed. Every request carries an Idempotency-Key
(as a careful client sends; `--no-idempotency-keys` leaves it out). Around each level the
services' MongoDB command counters are read (bench/commands.py), and the commands per issued
pass are reported per service and origin. Numbers go to bench/results/issue.json.
"""

import argparse
import asyncio
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx2

from bench import commands, cpu
from bench.pkpass import (
    EVENT_DESIGN,
    BuildStats,
    format_table,
    machine_facts,
    percentile,
    run_build_benchmark,
    stats_table,
    write_results,
)
from bench.stack import POLL_INTERVAL, Stack, new_client, running_stack

EVENT_TIMEOUT = 120.0
EVENTS_PAGE_LIMIT = 200
MAX_EVENT_PAGES = 1000
WARMUP_PASSES = 5
PKPASS_SECONDS = 3.0


@dataclass
class LevelResult:
    """One concurrency level: counts, wall time, latency percentiles."""

    requests: int
    concurrency: int
    ok: int
    errors: int
    seconds: float
    passes_per_second: float
    mean_ms: float
    p50_ms: float
    p99_ms: float
    max_ms: float
    error_samples: list[str] = field(default_factory=list)
    # service -> {origin: MongoDB commands per issued pass}; and the same by command name.
    commands_per_pass: dict[str, dict[str, float]] = field(default_factory=dict)
    commands_by_name: dict[str, float] = field(default_factory=dict)
    # From this level's last response until its every created event was listed.
    event_lag_seconds: float = 0.0
    # CPU milliseconds per pass by process (bench/cpu.py), until the last response.
    cpu_ms_per_pass: dict[str, float] = field(default_factory=dict)


@dataclass
class Outcome:
    """What the requests of one level produced."""

    latencies_ms: list[float] = field(default_factory=list)
    pass_ids: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    last_response: float = 0.0


# --- the requests ----------------------------------------------------------------------------


async def create_template(client: httpx2.AsyncClient) -> str:
    body = {
        "name": "Benchmark Concert",
        "type": "event",
        "apple_style": "eventTicket",
        "design": EVENT_DESIGN,
    }
    response = await client.post("/v1/templates", json=body)
    if response.status_code not in (200, 201):
        raise RuntimeError(f"template creation failed: {response.status_code} {response.text}")
    template_id: str = response.json()["id"]
    return template_id


def pass_body(template_id: str, number: int) -> dict[str, Any]:
    return {
        "template_id": template_id,
        "holder_name": f"Holder {number}",
        "holder_email": f"holder{number}@example.com",
        "field_values": {"seat": f"R{number // 20}-{number % 20}"},
    }


async def issue_one(
    client: httpx2.AsyncClient,
    body: dict[str, Any],
    gate: asyncio.Semaphore,
    outcome: Outcome,
    keyed: bool,
) -> None:
    headers = {"Idempotency-Key": uuid.uuid4().hex} if keyed else None
    async with gate:
        before = time.perf_counter()
        try:
            response = await client.post("/v1/passes", json=body, headers=headers)
        except httpx2.HTTPError as exc:
            outcome.errors.append(f"{type(exc).__name__}: {exc}")
            return
        finally:
            outcome.last_response = max(outcome.last_response, time.monotonic())
        elapsed_ms = (time.perf_counter() - before) * 1000.0
    if response.status_code in (200, 201):
        outcome.latencies_ms.append(elapsed_ms)
        outcome.pass_ids.append(response.json()["id"])
    else:
        outcome.errors.append(f"{response.status_code}: {response.text[:200]}")


async def issue_many(
    client: httpx2.AsyncClient,
    template_id: str,
    requests: int,
    concurrency: int,
    first: int,
    keyed: bool = True,
) -> tuple[Outcome, float]:
    """Issue `requests` passes, at most `concurrency` in flight; returns the wall time too."""
    gate = asyncio.Semaphore(concurrency)
    outcome = Outcome()
    started = time.perf_counter()
    async with asyncio.TaskGroup() as group:
        for number in range(first, first + requests):
            body = pass_body(template_id, number)
            group.create_task(issue_one(client, body, gate, outcome, keyed))
    return outcome, time.perf_counter() - started


def summarise(requests: int, concurrency: int, outcome: Outcome, seconds: float) -> LevelResult:
    latencies = outcome.latencies_ms
    ok = len(latencies)
    return LevelResult(
        requests=requests,
        concurrency=concurrency,
        ok=ok,
        errors=len(outcome.errors),
        seconds=round(seconds, 3),
        passes_per_second=round(ok / seconds, 1) if seconds > 0 else 0.0,
        mean_ms=round(sum(latencies) / ok, 2) if ok else 0.0,
        p50_ms=round(percentile(latencies, 0.50), 2),
        p99_ms=round(percentile(latencies, 0.99), 2),
        max_ms=round(max(latencies, default=0.0), 2),
        error_samples=outcome.errors[:5],
    )


# --- the events ------------------------------------------------------------------------------


async def created_pass_ids(client: httpx2.AsyncClient) -> set[str]:
    """Every pass id with a `created` event, following `starting_after` cursors."""
    seen: set[str] = set()
    params: dict[str, str | int] = {"limit": EVENTS_PAGE_LIMIT}
    for _ in range(MAX_EVENT_PAGES):
        response = await client.get("/v1/events", params=params)
        response.raise_for_status()
        page = response.json()
        events: list[dict[str, Any]] = page["data"]
        seen.update(event["pass_id"] for event in events if event["type"] == "created")
        if not page["has_more"] or not events:
            return seen
        params = {"limit": EVENTS_PAGE_LIMIT, "starting_after": events[-1]["id"]}
    raise RuntimeError(f"more than {MAX_EVENT_PAGES} pages of events")


@dataclass(frozen=True)
class EventWait:
    """When every created event was listed, after how many polls, and one listing's cost."""

    seen_at: float
    polls: int
    last_poll_seconds: float


async def wait_for_events(client: httpx2.AsyncClient, pass_ids: set[str]) -> EventWait:
    """Poll until every pass in `pass_ids` has a `created` event."""
    deadline = time.monotonic() + EVENT_TIMEOUT
    polls = 0
    while True:
        polls += 1
        started = time.monotonic()
        missing = pass_ids - await created_pass_ids(client)
        now = time.monotonic()
        if not missing:
            return EventWait(seen_at=now, polls=polls, last_poll_seconds=now - started)
        if now > deadline:
            raise TimeoutError(f"{len(missing)} passes still without a created event")
        await asyncio.sleep(POLL_INTERVAL)


# --- the run ---------------------------------------------------------------------------------


@dataclass
class E2EResult:
    template_id: str
    warmup_passes: int
    levels: list[LevelResult]
    passes_issued: int
    event_lag_seconds: float
    event_polls: int
    event_listing_seconds: float


def scrape_commands(stack: Stack) -> commands.Counts:
    address = urlsplit(stack.base_url)
    return commands.scrape(address.hostname or "127.0.0.1", address.port or 80)


async def drive(stack: Stack, requests: int, levels: Sequence[int], keyed: bool) -> E2EResult:
    async with new_client(stack, max(levels)) as client:
        template_id = await create_template(client)
        warmup, _ = await issue_many(client, template_id, WARMUP_PASSES, 1, 0, keyed)
        issued = set(warmup.pass_ids)
        results: list[LevelResult] = []
        waits: list[EventWait] = []
        first = WARMUP_PASSES
        for concurrency in levels:
            before = await asyncio.to_thread(scrape_commands, stack)
            cpu_before = cpu.stack_cpu(stack.proc.pid)
            outcome, seconds = await issue_many(
                client, template_id, requests, concurrency, first, keyed
            )
            cpu_after = cpu.stack_cpu(stack.proc.pid)
            answered = await asyncio.to_thread(scrape_commands, stack)
            # The relays and consumers finish this level's events before their share is read;
            # the listing requests of the wait count as api http commands, so the request
            # path's share is the one read when the last response came.
            waited = await wait_for_events(client, set(outcome.pass_ids))
            settled = await asyncio.to_thread(scrape_commands, stack)
            delta = commands.level_delta(before, answered, settled)
            first += requests
            issued.update(outcome.pass_ids)
            waits.append(waited)
            level = summarise(requests, concurrency, outcome, seconds)
            level.event_lag_seconds = round(waited.seen_at - outcome.last_response, 3)
            if outcome.pass_ids:
                level.cpu_ms_per_pass = cpu.per_pass_ms(
                    cpu_before, cpu_after, len(outcome.pass_ids)
                )
                level.commands_per_pass = commands.per_request(delta, len(outcome.pass_ids))
                level.commands_by_name = commands.by_command(delta, len(outcome.pass_ids))
            results.append(level)
            print(level_table([level]), "\n", flush=True)
            print("MongoDB commands per pass:\n" + commands.table(level.commands_per_pass), "\n")
            print("CPU ms per pass:", level.cpu_ms_per_pass, "\n", flush=True)
    return E2EResult(
        template_id=template_id,
        warmup_passes=len(warmup.pass_ids),
        levels=results,
        passes_issued=len(issued),
        event_lag_seconds=max(level.event_lag_seconds for level in results),
        event_polls=sum(wait.polls for wait in waits),
        event_listing_seconds=round(max(wait.last_poll_seconds for wait in waits), 3),
    )


def level_table(levels: Sequence[LevelResult]) -> str:
    headers = ["requests", "concurrency", "passes/s", "p50 ms", "p99 ms", "errors", "lag ms"]
    rows = [
        [
            str(level.requests),
            str(level.concurrency),
            f"{level.passes_per_second:.1f}",
            f"{level.p50_ms:.1f}",
            f"{level.p99_ms:.1f}",
            str(level.errors),
            f"{level.event_lag_seconds * 1000:.0f}",
        ]
        for level in levels
    ]
    return format_table(headers, rows)


def ratios(e2e: E2EResult, build: BuildStats) -> dict[str, float]:
    """End-to-end passes/s divided by single-process pkpass builds/s, per concurrency level."""
    return {
        str(level.concurrency): round(level.passes_per_second / build.builds_per_second, 4)
        for level in e2e.levels
    }


def report(e2e: E2EResult, build: BuildStats) -> dict[str, float]:
    print("all levels:")
    print(level_table(e2e.levels))
    for level in e2e.levels:
        for sample in level.error_samples:
            print(f"  error at concurrency {level.concurrency}: {sample}")
    print(
        f"\nevent-recording lag (worst level): {e2e.event_lag_seconds * 1000:.0f} ms after a "
        f"level's last response until all its created events were listed ({e2e.event_polls} "
        f"polls; one full listing of up to {e2e.passes_issued} events takes "
        f"{e2e.event_listing_seconds * 1000:.0f} ms, so the lag is only resolved to that)"
    )
    print(f"\npkpass build rate, one process, {PKPASS_SECONDS:g} s:")
    print(stats_table(build))
    by_level = ratios(e2e, build)
    print("\nend-to-end passes/s / pkpass builds/s:")
    for level in e2e.levels:
        ratio = by_level[str(level.concurrency)]
        print(
            f"  concurrency {level.concurrency:>3}: {level.passes_per_second:.1f} / "
            f"{build.builds_per_second:.1f} = {ratio:.4f}  ({ratio * 100:.2f} %)"
        )
    return by_level


def parse_levels(text: str) -> list[int]:
    try:
        levels = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected integers like 1,8,32, got {text!r}") from None
    if not levels or any(level < 1 for level in levels):
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return levels


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text!r}")
    return value


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.issue", description=__doc__)
    parser.add_argument("--requests", type=positive_int, default=300, help="passes per level")
    parser.add_argument("--concurrency", type=parse_levels, default=[1, 8, 32])
    parser.add_argument(
        "--no-idempotency-keys",
        dest="keyed",
        action="store_false",
        help="send POST /v1/passes without an Idempotency-Key",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    requests: int = args.requests
    levels: list[int] = args.concurrency
    with (
        tempfile.TemporaryDirectory(prefix="tessera-bench-") as work_dir,
        running_stack(Path(work_dir)) as stack,
    ):
        e2e = asyncio.run(drive(stack, requests, levels, args.keyed))
    build = run_build_benchmark(PKPASS_SECONDS)
    by_level = report(e2e, build)
    best = max(e2e.levels, key=lambda level: level.passes_per_second)
    document = {
        "benchmark": "issue",
        "requests_per_level": requests,
        "concurrency_levels": levels,
        "idempotency_keys": args.keyed,
        "end_to_end": asdict(e2e),
        "pkpass": asdict(build),
        "ratio_passes_per_build_by_concurrency": by_level,
        "best_ratio": by_level[str(best.concurrency)],
        "machine": machine_facts(),
    }
    print(f"\nwrote {write_results('issue', document)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
