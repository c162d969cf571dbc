"""Webhook delivery throughput and latency: the whole stack under `tessera up`, a local receiver.

Run with `python -m bench.webhooks [--passes 200] [--webhooks 1,10] [--concurrency 16]
[--quiet-passes 30] [--no-slow] [--no-batch]`. It starts `tessera up` on a fresh data directory
(like bench.issue; development settings, so webhooks may target loopback), runs a receiver on
127.0.0.1 in a process of its own that answers 200 at once (bench/receiver.py: uvicorn), and
for each level subscribes that many webhooks of the development account to `pass.issued`,
then issues passes:

1. 30 one at a time, 1 webhook (the latency of a quiet system);
2. N at the given concurrency with 1 and with 10 webhooks (deliveries paced by issuing);
3. the same with 10 webhooks of which one answers 500 after 2 s, alternated with 10 healthy
   ones (`--isolation-rounds`, 3 slow levels): the healthy ones' median p99 beside the slow
   one against their median p99 without it (isolation of a slow endpoint);
4. N with 10 webhooks issued with POST /v1/passes/batch (100 rows a request, all at once):
   the events come faster than the delivery path takes them, so this is its capacity.

Every `created` event becomes one delivery per webhook. It waits until every delivery (of the
healthy webhooks) arrived and reports:

- deliveries per second: deliveries received / (last arrival - first arrival), and its ratio
  to the raw POSTs/s: the same HTTP client library as the sender (httpx2, a keep-alive pool,
  16 at a time) POSTing one real signed delivery to the same receiver from this process,
  measured after the first level and again at the end (the mean of the two);
- latency from the event (its `created_at`, milliseconds) to the first attempt's arrival at the
  receiver, p50 / p99 / max;
- duplicates (a delivery id that arrived more than once; 0 expected when every answer is 200).

Numbers go to bench/results/webhooks.json.
"""

import argparse
import asyncio
import itertools
import json
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import httpx2

from bench.issue import create_template, issue_many, parse_levels, pass_body
from bench.pkpass import format_table, machine_facts, percentile, write_results
from bench.receiver import ARRIVALS, RAW_PREFIX, SAMPLE, SLOW_SUFFIX
from bench.stack import REPO_ROOT, child_process, new_client, running_stack
from bench.stack import Stack as RunningStack
from tessera.processes import free_port

DELIVERY_TIMEOUT = 120.0
POLL_INTERVAL = 0.05
RECEIVER_HOST = "127.0.0.1"
RECEIVER_START_SECONDS = 30.0
RAW_POSTS = 3000
LEVEL_RUNS = itertools.count(1)
RAW_CONCURRENCY = 16


@dataclass(frozen=True)
class Arrival:
    delivery_id: str
    webhook_path: str
    event_created_at: float  # unix seconds, from the body
    received_at: float


class Collector:
    """Arrivals at the receiver (bench/receiver.py), read from the file it appends to."""

    def __init__(self, out: Path) -> None:
        self._arrivals = out / ARRIVALS
        self._sample = out / SAMPLE
        self._read = 0
        self.arrivals: list[Arrival] = []

    @property
    def sample(self) -> tuple[bytes, dict[str, str]] | None:
        """One delivery as it arrived (body and signature headers), for the raw-POST reference."""
        if not self._sample.exists():
            return None
        sample = json.loads(self._sample.read_text())
        return sample["body"].encode(), sample["headers"]

    def for_paths(self, prefix: str) -> list[Arrival]:
        with self._arrivals.open("rb") as arrivals:
            arrivals.seek(self._read)
            data = arrivals.read()
        complete = data[: data.rfind(b"\n") + 1]  # a line being written is read next time
        self._read += len(complete)
        self.arrivals += [Arrival(*json.loads(line)) for line in complete.splitlines()]
        return [a for a in self.arrivals if a.webhook_path.startswith(prefix)]


@contextmanager
def receiver(work_dir: Path) -> Iterator[tuple[str, Collector]]:
    """The receiver in a process of its own (bench/receiver.py), and what arrived at it."""
    out = work_dir / "receiver"
    out.mkdir()
    (out / ARRIVALS).touch()
    port = free_port(RECEIVER_HOST)
    argv = [sys.executable, "-m", "bench.receiver", "--port", str(port), "--out", str(out)]
    proc = subprocess.Popen(argv, cwd=REPO_ROOT, stdin=subprocess.DEVNULL)
    failure = "the bench receiver did not start"
    with child_process(proc, lambda: _accepts(port), failure, RECEIVER_START_SECONDS):
        yield f"http://{RECEIVER_HOST}:{port}", Collector(out)


def _accepts(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex((RECEIVER_HOST, port)) == 0


@dataclass
class LevelResult:
    webhooks: int
    slow_webhooks: int  # of `webhooks`, answering 500 after SLOW_SECONDS; not counted below
    batch: bool  # issued with POST /v1/passes/batch, `issue_concurrency` requests at once
    passes: int
    issue_concurrency: int
    deliveries: int
    duplicates: int
    seconds: float
    deliveries_per_second: float
    ratio_to_raw_posts: float
    latency_p50_ms: float
    latency_p99_ms: float
    latency_max_ms: float


@dataclass(frozen=True)
class Level:
    webhooks: int
    passes: int
    concurrency: int
    slow: int = 0
    batch: bool = False  # issue with POST /v1/passes/batch (100 rows each, all at once)


async def issue_in_batches(client: httpx2.AsyncClient, template_id: str, passes: int) -> int:
    """Issue `passes` passes with POST /v1/passes/batch, 100 rows per request, all requests
    at once; answers how many were created."""

    async def one(first: int) -> int:
        rows = [pass_body(template_id, n) for n in range(first, min(first + 100, passes))]
        response = await client.post("/v1/passes/batch", json={"passes": rows})
        response.raise_for_status()
        return sum(1 for row in response.json()["data"] if row["status"] == 201)

    return sum(await asyncio.gather(*(one(first) for first in range(0, passes, 100))))


async def raw_posts_per_second(base: str, collector: Collector) -> float:
    """The reference: the sender's HTTP client (httpx2, a keep-alive pool) POSTing one real
    signed delivery to the same receiver from this process, RAW_CONCURRENCY at a time."""
    if collector.sample is None:
        raise RuntimeError("no delivery arrived yet to use as the raw-POST sample")
    body, headers = collector.sample
    limits = httpx2.Limits(max_connections=RAW_CONCURRENCY)
    async with httpx2.AsyncClient(limits=limits, trust_env=False) as client:

        async def worker(count: int) -> None:
            for _ in range(count):
                response = await client.post(f"{base}{RAW_PREFIX}0", content=body, headers=headers)
                response.raise_for_status()

        started = time.perf_counter()
        share = RAW_POSTS // RAW_CONCURRENCY
        await asyncio.gather(*(worker(share) for _ in range(RAW_CONCURRENCY)))
        return share * RAW_CONCURRENCY / (time.perf_counter() - started)


async def run_level(
    stack: RunningStack, base: str, collector: Collector, level: Level, raw: float
) -> LevelResult:
    # Unique per run of a level: a level that runs again must not count the last run's arrivals.
    prefix = f"/level-{next(LEVEL_RUNS)}-{level.webhooks}-{level.slow}-{level.batch}/"
    async with new_client(stack, level.concurrency) as client:
        for n in range(level.webhooks):
            path = f"{prefix}{n}{SLOW_SUFFIX if n < level.slow else ''}"
            body = {"url": f"{base}{path}", "events": ["pass.issued"]}
            response = await client.post("/v1/webhooks", json=body)
            if response.status_code != 200:
                raise RuntimeError(f"webhook creation failed: {response.text}")
        template_id = await create_template(client)
        if level.batch:
            issued = await issue_in_batches(client, template_id, level.passes)
        else:
            outcome, _ = await issue_many(client, template_id, level.passes, level.concurrency, 0)
            if outcome.errors:
                raise RuntimeError(f"issuing failed: {outcome.errors[:3]}")
            issued = len(outcome.pass_ids)
        expected = issued * (level.webhooks - level.slow)
        deadline = time.monotonic() + DELIVERY_TIMEOUT
        while len({a.delivery_id for a in _healthy(collector, prefix)}) < expected:
            if time.monotonic() > deadline:
                raise TimeoutError(f"deliveries missing after {DELIVERY_TIMEOUT:g} s")
            await asyncio.sleep(POLL_INTERVAL)
        # Delete the webhooks so the next level's events do not reach them.
        listed = (await client.get("/v1/webhooks", params={"limit": 100})).json()["data"]
        for hook in listed:
            await client.delete(f"/v1/webhooks/{hook['id']}")
    arrivals = _healthy(collector, prefix)
    first: dict[str, Arrival] = {}
    for arrival in sorted(arrivals, key=lambda a: a.received_at):
        first.setdefault(arrival.delivery_id, arrival)
    latencies = [(a.received_at - a.event_created_at) * 1000.0 for a in first.values()]
    span = max(a.received_at for a in arrivals) - min(a.received_at for a in arrivals)
    rate = round(len(first) / span, 1) if span else 0.0
    return LevelResult(
        webhooks=level.webhooks,
        slow_webhooks=level.slow,
        batch=level.batch,
        passes=level.passes,
        issue_concurrency=level.concurrency,
        deliveries=len(first),
        duplicates=len(arrivals) - len(first),
        seconds=round(span, 3),
        deliveries_per_second=rate,
        ratio_to_raw_posts=round(rate / raw, 3),
        latency_p50_ms=round(percentile(latencies, 0.50), 1),
        latency_p99_ms=round(percentile(latencies, 0.99), 1),
        latency_max_ms=round(max(latencies), 1),
    )


def _healthy(collector: Collector, prefix: str) -> list[Arrival]:
    return [a for a in collector.for_paths(prefix) if not a.webhook_path.endswith(SLOW_SUFFIX)]


def table(levels: Sequence[LevelResult]) -> str:
    headers = ["webhooks", "slow", "passes", "conc", "deliveries", "dups", "seconds"]
    headers += ["deliv/s", "x raw", "p50 ms", "p99 ms", "max ms"]
    rows = [
        [
            str(r.webhooks),
            str(r.slow_webhooks),
            str(r.passes),
            f"{r.issue_concurrency} batch" if r.batch else str(r.issue_concurrency),
            str(r.deliveries),
            str(r.duplicates),
            f"{r.seconds:.2f}",
            f"{r.deliveries_per_second:.1f}",
            f"{r.ratio_to_raw_posts:.3f}",
            f"{r.latency_p50_ms:.1f}",
            f"{r.latency_p99_ms:.1f}",
            f"{r.latency_max_ms:.1f}",
        ]
        for r in levels
    ]
    return format_table(headers, rows)


async def drive(
    stack: RunningStack, base: str, collector: Collector, args: argparse.Namespace
) -> tuple[list[LevelResult], float]:
    # First one pass at a time, so the latency is not queueing behind other work; then loaded;
    # then, beside nine healthy webhooks, one that answers 500 after SLOW_SECONDS.
    levels = [Level(1, args.quiet_passes, 1)]
    levels += [Level(n, args.passes, args.concurrency) for n in args.webhooks]
    if args.slow:
        # Alternated, so the comparison is not one level against another on a machine whose
        # speed drifts: each kind's median p99 over the rounds.
        healthy, slow = (
            Level(10, args.passes, args.concurrency),
            Level(10, args.passes, args.concurrency, slow=1),
        )
        for round_ in range(args.isolation_rounds):
            levels += [slow, healthy] if round_ < args.isolation_rounds - 1 else [slow]
    if args.batch:
        levels.append(Level(10, args.passes, -(-args.passes // 100), batch=True))
    results = []
    raw = 0.0
    for level in levels:
        if raw == 0.0 and collector.sample is not None:
            raw = await raw_posts_per_second(base, collector)
            print(f"raw POSTs/s (httpx2, {RAW_CONCURRENCY} at a time): {raw:.1f}")
        result = await run_level(stack, base, collector, level, raw or 1.0)
        print(
            f"{level.webhooks} webhook(s) ({level.slow} slow), {level.passes} passes at "
            f"concurrency {level.concurrency}: {result.deliveries_per_second} deliveries/s, "
            f"p50 {result.latency_p50_ms} ms, p99 {result.latency_p99_ms} ms"
        )
        results.append(result)
    # Again at the end, on the machine as loaded as it is now: the mean of the two.
    raw = (raw + await raw_posts_per_second(base, collector)) / 2
    print(f"raw POSTs/s, mean of the two measurements: {raw:.1f}")
    for result in results:
        result.ratio_to_raw_posts = round(result.deliveries_per_second / raw, 3)
    if (isolation := isolation_summary(results)) is not None:
        print(isolation)
    return results, raw


def isolation_summary(results: Sequence[LevelResult]) -> str | None:
    """The healthy webhooks' median p99 with ten healthy webhooks and beside a slow one."""

    def median_p99(slow: int) -> float | None:
        p99s = sorted(
            r.latency_p99_ms
            for r in results
            if r.webhooks == 10 and r.slow_webhooks == slow and not r.batch
        )
        return p99s[len(p99s) // 2] if p99s else None

    alone, beside = median_p99(0), median_p99(1)
    if alone is None or beside is None:
        return None
    return (
        f"isolation: healthy p99, median over the rounds: {alone:.1f} ms with ten healthy "
        f"webhooks, {beside:.1f} ms beside a slow one ({beside / alone - 1:+.0%})"
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passes", type=int, default=200)
    parser.add_argument("--webhooks", type=parse_levels, default=[1, 10])
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--quiet-passes", type=int, default=30)
    parser.add_argument(
        "--no-slow", dest="slow", action="store_false", help="skip the slow-endpoint level"
    )
    parser.add_argument(
        "--no-batch", dest="batch", action="store_false", help="skip the batch-issued level"
    )
    parser.add_argument(
        "--isolation-rounds",
        type=int,
        default=3,
        help="slow-endpoint levels, alternated with healthy ones (default 3)",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    with (
        tempfile.TemporaryDirectory(prefix="bench-webhooks-") as work,
        running_stack(Path(work)) as stack,
        receiver(Path(work)) as (base, collector),
    ):
        levels, raw = asyncio.run(drive(stack, base, collector, args))
    print(table(levels))
    path = write_results(
        "webhooks",
        {
            "benchmark": "webhooks",
            "passes_per_level": args.passes,
            "issue_concurrency": args.concurrency,
            "raw_posts_per_second": round(raw, 1),
            "isolation": isolation_summary(levels),
            "store": "secantusd-py (the embedded MongoDB-wire store of tessera up)",
            "levels": [asdict(level) for level in levels],
            "machine": machine_facts(),
        },
    )
    print(f"results written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
