"""Read latency at two collection sizes: do the indexes carry GET /v1/passes as passes pile up?

Run with `python -m bench.reads [--small 1000] [--large 100000] [--requests 200] [--budget 30]`.
It starts `tessera up` like bench.issue, creates one eventTicket template and issues one pass
through the API (the reference document), then seeds the `passes` collection of the development
account (test mode) directly, in batches of `insert_many`: records built with the issuer's own model
(`PassRecord`, fields as `_create_pass` sets them), ids from the same time-sortable format with
`created_at` spread over the past year, and a realistic spread of `holder_email` values (a
pool of addresses shared by a few passes each, one in ten passes without one). Seeding 100,000
passes through POST /v1/passes would take many minutes at ~100 passes/s.

At `--small` passes and again after seeding up to `--large`, one request at a time, it times:

- `holder_email`: GET /v1/passes?holder_email=... for an address with the same 5 passes at
  both sizes (so both sizes return the same page);
- `first_pages`: GET /v1/passes?limit=100, then `starting_after` the last id, pages 1..20;
- `deep_page`: GET /v1/passes?limit=100&starting_after=<the id in the middle of the collection>;
- `retrieve`: GET /v1/passes/{id} for ids drawn from the whole collection;

(`count` in the JSON says how many: a query stops after `--budget` seconds once it has 5),
and the same queries sent straight to the store with pymongo (`db_*`), which leaves HTTP, auth
and serialization out. It reports p50/p99 per query at each size and the ratio large/small:
near 1 means an index carries the query. It also records `explain` for each query shape the api
sends (winning plan stages, keys and documents examined). Numbers go to bench/results/reads.json.
"""

import argparse
import asyncio
import random
import secrets
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from importlib import metadata
from pathlib import Path
from typing import Any

import httpx2
from pymongo import DESCENDING

from bench.issue import create_template, issue_many, positive_int
from bench.pkpass import format_table, machine_facts, percentile, write_results
from bench.stack import DATABASE, Stack, new_client, running_stack
from shared.ids import ALPHABET, PREFIXES, short_slug
from shared.models import PassRecord, email_key
from shared.mongo import Database, Document, create_client

PAGE_LIMIT = 100
LIST_DEFAULT_LIMIT = 50  # GET /v1/passes without `limit`
WALK_PAGES = 20
SEED_BATCH = 1000
HISTORY = timedelta(days=365)
EMAIL_POOL = 40_000
NO_EMAIL_SHARE = 0.1
TARGET_EMAIL = "bench-target@example.com"
TARGET_PASSES = 5
SEED = 7
MIN_SAMPLES = 5
# The id format of shared/ids.py: a 48-bit millisecond timestamp and 80 random bits in base62.
ID_CHARS = 22
RANDOM_BITS = 80


# --- pure helpers ------------------------------------------------------------------------------


def id_at(kind: str, moment: datetime, rng: random.Random) -> str:
    """An id like `shared.ids.new_id(kind)` minted at `moment` (ids sort by creation time)."""
    value = int(moment.timestamp() * 1000) << RANDOM_BITS | rng.getrandbits(RANDOM_BITS)
    chars = []
    for _ in range(ID_CHARS):
        value, rem = divmod(value, 62)
        chars.append(ALPHABET[rem])
    return f"{PREFIXES[kind]}_{''.join(reversed(chars))}"


@dataclass(frozen=True)
class Latency:
    """Latencies of one query at one size, in milliseconds."""

    count: int
    mean_ms: float
    p50_ms: float
    p99_ms: float
    max_ms: float


def latency(samples_ms: Sequence[float]) -> Latency:
    return Latency(
        count=len(samples_ms),
        mean_ms=round(sum(samples_ms) / len(samples_ms), 3) if samples_ms else 0.0,
        p50_ms=round(percentile(samples_ms, 0.50), 3),
        p99_ms=round(percentile(samples_ms, 0.99), 3),
        max_ms=round(max(samples_ms, default=0.0), 3),
    )


def ratio(large: float, small: float) -> float | None:
    """large / small, rounded; None when the small figure is zero."""
    return round(large / small, 3) if small > 0 else None


def ratios(
    small: Mapping[str, Latency], large: Mapping[str, Latency]
) -> dict[str, dict[str, float | None]]:
    """Per query present at both sizes: p50 and p99 of the large run over the small run."""
    return {
        name: {
            "p50": ratio(large[name].p50_ms, small[name].p50_ms),
            "p99": ratio(large[name].p99_ms, small[name].p99_ms),
        }
        for name in small
        if name in large
    }


def ratio_table(
    small_size: int,
    large_size: int,
    small: Mapping[str, Latency],
    large: Mapping[str, Latency],
) -> str:
    """p50/p99 per query at both sizes and the large/small ratios."""
    by_name = ratios(small, large)

    def shown(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f}"

    headers = [
        "query",
        f"p50 @{small_size}",
        f"p99 @{small_size}",
        f"p50 @{large_size}",
        f"p99 @{large_size}",
        "p50 ratio",
        "p99 ratio",
    ]
    rows = [
        [
            name,
            f"{small[name].p50_ms:.2f}",
            f"{small[name].p99_ms:.2f}",
            f"{large[name].p50_ms:.2f}",
            f"{large[name].p99_ms:.2f}",
            shown(by_name[name]["p50"]),
            shown(by_name[name]["p99"]),
        ]
        for name in by_name
    ]
    return format_table(headers, rows)


def _stages(node: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    yield node
    if isinstance(node.get("inputStage"), Mapping):
        yield from _stages(node["inputStage"])
    for child in node.get("inputStages") or []:
        if isinstance(child, Mapping):
            yield from _stages(child)


def plan_summary(explained: Mapping[str, Any]) -> dict[str, Any]:
    """The winning plan's stages (outermost first), its index, and what execution examined."""
    planner = explained.get("queryPlanner", {})
    stages = list(_stages(planner.get("winningPlan", {})))
    indexes = [stage["indexName"] for stage in stages if "indexName" in stage]
    summary: dict[str, Any] = {
        "stages": [str(stage.get("stage", "?")) for stage in stages],
        "index": indexes[0] if indexes else None,
        "scan": "IXSCAN" if any(s.get("stage") == "IXSCAN" for s in stages) else "COLLSCAN",
        "blocking_sort": any(stage.get("stage") == "SORT" for stage in stages),
    }
    execution = explained.get("executionStats")
    if isinstance(execution, Mapping):
        for key in ("nReturned", "totalKeysExamined", "totalDocsExamined"):
            if key in execution:
                summary[key] = execution[key]
    return summary


def explain_table(plans: Mapping[str, Mapping[str, Any]]) -> str:
    headers = ["query shape", "scan", "index", "sort", "returned", "keys", "docs"]
    rows = [
        [
            name,
            str(plan.get("scan", "?")),
            str(plan.get("index") or "-"),
            "blocking" if plan.get("blocking_sort") else "index",
            str(plan.get("nReturned", "-")),
            str(plan.get("totalKeysExamined", "-")),
            str(plan.get("totalDocsExamined", "-")),
        ]
        for name, plan in plans.items()
    ]
    return format_table(headers, rows)


# --- seeding -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Seeder:
    """Builds pass documents of the issuer's shape for one account, mode and template."""

    account_id: str
    mode: str
    template_id: str
    large: int
    start: datetime
    targets: frozenset[int]

    def email(self, index: int, rng: random.Random) -> str | None:
        if index in self.targets:
            return TARGET_EMAIL
        if rng.random() < NO_EMAIL_SHARE:
            return None
        return f"holder{rng.randrange(EMAIL_POOL)}@example.com"

    def document(self, index: int, rng: random.Random) -> Document:
        """The `index`-th pass of the timeline, as `IssuerRepository` stores it."""
        step = HISTORY / self.large
        created = self.start + step * index + step * rng.random() * 0.5
        created = created.replace(microsecond=created.microsecond // 1000 * 1000)
        record = PassRecord.model_validate(
            {
                "_id": id_at("pass", created, rng),
                "account_id": self.account_id,
                "mode": self.mode,
                "short_id": short_slug(),
                "template_id": self.template_id,
                "serial_number": str(uuid.uuid4()),
                "holder_email": self.email(index, rng),
                "holder_name": f"Holder {index}",
                "field_values": {"seat": f"R{index // 20}-{index % 20}"},
                "metadata": {"order": str(index)},
                "created_via_api": True,
                "authentication_token": secrets.token_urlsafe(24),
                "created_at": created,
                "updated_at": created,
            }
        )
        return record.to_document()


def target_indexes(small: int) -> frozenset[int]:
    """Where the target address's passes sit: spread over the first `small` passes."""
    return frozenset(small * (n + 1) // (TARGET_PASSES + 1) for n in range(TARGET_PASSES))


async def seed(db: Database, seeder: Seeder, first: int, end: int, rng: random.Random) -> float:
    """Insert passes [first, end) of the timeline; returns the seconds it took."""
    started = time.perf_counter()
    for batch_start in range(first, end, SEED_BATCH):
        batch_end = min(end, batch_start + SEED_BATCH)
        docs = [seeder.document(i, rng) for i in range(batch_start, batch_end)]
        await db["passes"].insert_many(docs, ordered=False)
        if (batch_end // SEED_BATCH) % 10 == 0 or batch_end == end:
            print(f"  seeded {batch_end:,} / {end:,}", flush=True)
    return time.perf_counter() - started


def shape_problems(reference: Document, seeded: Document) -> list[str]:
    """Differences between an API-issued pass document and a seeded one (keys, value types)."""
    problems = [f"missing {key}" for key in sorted(reference.keys() - seeded.keys())]
    problems += [f"extra {key}" for key in sorted(seeded.keys() - reference.keys())]
    for key in reference.keys() & seeded.keys():
        ref, ours = reference[key], seeded[key]
        if ref is not None and ours is not None and type(ref) is not type(ours):
            problems.append(f"{key}: {type(ref).__name__} vs {type(ours).__name__}")
    return problems


# --- measuring ---------------------------------------------------------------------------------


async def timed(pending: Awaitable[Any]) -> float:
    """Milliseconds until `pending` (a coroutine, so nothing ran before this) completes."""
    before = time.perf_counter()
    await pending
    return (time.perf_counter() - before) * 1000.0


async def get_ok(client: httpx2.AsyncClient, path: str, params: dict[str, Any]) -> Any:
    response = await client.get(path, params=params)
    if response.status_code != 200:
        raise RuntimeError(f"GET {path} {params}: {response.status_code} {response.text[:300]}")
    return response.json()


async def walk_pages(client: httpx2.AsyncClient, pages: int, deadline: float) -> list[float]:
    """Pages 1..`pages` of 100 passes, following `starting_after`; one latency per page.

    Stops early, after at least one page, once `deadline` (time.monotonic) has passed.
    """
    samples: list[float] = []
    params: dict[str, Any] = {"limit": PAGE_LIMIT}
    for _ in range(pages):
        before = time.perf_counter()
        page = await get_ok(client, "/v1/passes", params)
        samples.append((time.perf_counter() - before) * 1000.0)
        if not page["has_more"] or time.monotonic() > deadline:
            break
        params = {"limit": PAGE_LIMIT, "starting_after": page["data"][-1]["id"]}
    return samples


@dataclass(frozen=True)
class Probe:
    """What the queries of one size need: the account scope and ids to aim at."""

    account_id: str
    mode: str
    middle_id: str
    sample_ids: list[str]


async def probe(db: Database, account_id: str, mode: str, requests: int) -> Probe:
    scope = {"account_id": account_id, "mode": mode}
    total = await db["passes"].count_documents(scope)
    middle = db["passes"].find(scope, {"_id": 1}).sort("_id", DESCENDING).skip(total // 2)
    middle_doc = await middle.limit(1).next()
    sample = await db["passes"].aggregate([{"$match": scope}, {"$sample": {"size": requests}}])
    ids = [doc["_id"] async for doc in sample]
    return Probe(account_id, mode, str(middle_doc["_id"]), ids)


async def sample(
    make: Callable[[int], Awaitable[Any]], requests: int, budget_seconds: float
) -> list[float]:
    """Up to `requests` timed calls, fewer if `budget_seconds` ran out (at least MIN_SAMPLES)."""
    samples: list[float] = []
    deadline = time.monotonic() + budget_seconds
    for n in range(requests):
        samples.append(await timed(make(n)))
        if len(samples) >= MIN_SAMPLES and time.monotonic() > deadline:
            break
    return samples


async def http_latencies(
    client: httpx2.AsyncClient, target: Probe, requests: int, budget_seconds: float
) -> dict[str, Latency]:
    by_email = {"holder_email": TARGET_EMAIL}
    deep = {"limit": PAGE_LIMIT, "starting_after": target.middle_id}
    ids = target.sample_ids
    samples = {
        "holder_email": await sample(
            lambda _: get_ok(client, "/v1/passes", by_email), requests, budget_seconds
        ),
        "deep_page": await sample(
            lambda _: get_ok(client, "/v1/passes", deep), requests, budget_seconds
        ),
        "retrieve": await sample(
            lambda n: get_ok(client, f"/v1/passes/{ids[n % len(ids)]}", {}),
            requests,
            budget_seconds,
        ),
    }
    walked: list[float] = []
    deadline = time.monotonic() + budget_seconds
    while len(walked) < requests and (len(walked) < MIN_SAMPLES or time.monotonic() < deadline):
        walked += await walk_pages(client, WALK_PAGES, deadline)
    samples["first_pages"] = walked
    return {name: latency(values) for name, values in samples.items()}


def query_shapes(target: Probe) -> dict[str, tuple[dict[str, Any], int]]:
    """The filters and limits the api sends for the measured requests (shared/pagination.py)."""
    scope: dict[str, Any] = {"account_id": target.account_id, "mode": target.mode}
    return {
        "list": (scope, LIST_DEFAULT_LIMIT + 1),
        "list_starting_after": ({**scope, "_id": {"$lt": target.middle_id}}, PAGE_LIMIT + 1),
        "holder_email": (
            {**scope, "holder_email_key": email_key(TARGET_EMAIL)},
            LIST_DEFAULT_LIMIT + 1,
        ),
        "template_id": ({**scope, "template_id": "tmpl_none"}, LIST_DEFAULT_LIMIT + 1),
        "retrieve": ({"_id": target.sample_ids[0], **scope}, 1),
    }


async def db_latencies(
    db: Database, target: Probe, requests: int, budget_seconds: float
) -> dict[str, Latency]:
    """The same shapes straight to the store: no HTTP, auth or serialization."""
    passes = db["passes"]
    shapes = query_shapes(target)
    samples: dict[str, list[float]] = {}

    def runner(query: dict[str, Any], limit: int) -> Callable[[int], Awaitable[None]]:
        async def run(_: int) -> None:
            __ = [doc async for doc in passes.find(query).sort("_id", DESCENDING).limit(limit)]

        return run

    for name in ("holder_email", "list_starting_after", "retrieve"):
        query, limit = shapes[name]
        samples[f"db_{name}"] = await sample(runner(query, limit), requests, budget_seconds)
    return {name: latency(values) for name, values in samples.items()}


async def explain_all(db: Database, target: Probe) -> dict[str, dict[str, Any]]:
    plans: dict[str, dict[str, Any]] = {}
    for name, (query, limit) in query_shapes(target).items():
        try:
            explained = (
                await db["passes"].find(query).sort("_id", DESCENDING).limit(limit).explain()
            )
        except Exception as exc:
            plans[name] = {"error": f"{type(exc).__name__}: {exc}"}
            continue
        plans[name] = plan_summary(explained)
    return plans


# --- the run -----------------------------------------------------------------------------------


@dataclass
class SizeResult:
    passes: int
    seed_seconds: float
    latencies: dict[str, Latency]
    explain: dict[str, dict[str, Any]]


async def measure(
    client: httpx2.AsyncClient, db: Database, stack: Stack, requests: int, budget_seconds: float
) -> SizeResult:
    passes = await db["passes"].count_documents({"account_id": stack.account_id, "mode": "test"})
    target = await probe(db, stack.account_id, "test", requests)
    await http_latencies(client, target, 1, 0.0)  # warm-up: one request of each
    measured = await http_latencies(client, target, requests, budget_seconds)
    measured.update(await db_latencies(db, target, requests, budget_seconds))
    plans = await explain_all(db, target)
    print(f"\n{passes:,} passes:")
    print(explain_table(plans))
    return SizeResult(passes=passes, seed_seconds=0.0, latencies=measured, explain=plans)


async def drive(
    stack: Stack, small: int, large: int, requests: int, budget_seconds: float
) -> list[SizeResult]:
    mongo = create_client(stack.mongodb_url)
    db = mongo[DATABASE]
    rng = random.Random(SEED)
    try:
        async with new_client(stack, 1) as client:
            template_id = await create_template(client)
            issued, _ = await issue_many(client, template_id, 1, 1, 0)
            if not issued.pass_ids:
                raise RuntimeError(f"could not issue the reference pass: {issued.errors}")
            reference = await db["passes"].find_one({"_id": issued.pass_ids[0]})
            seeder = Seeder(
                account_id=stack.account_id,
                mode="test",
                template_id=template_id,
                large=large,
                start=datetime.now(UTC) - HISTORY - timedelta(days=1),
                targets=target_indexes(small),
            )
            problems = shape_problems(reference or {}, seeder.document(0, random.Random(0)))
            if problems:
                raise RuntimeError(f"seeded passes differ from issued ones: {problems}")
            results: list[SizeResult] = []
            seeded = 0
            for size in (small, large):
                print(f"\nseeding to {size:,} passes", flush=True)
                seconds = await seed(db, seeder, seeded, size, rng)
                seeded = size
                result = await measure(client, db, stack, requests, budget_seconds)
                result.seed_seconds = round(seconds, 2)
                results.append(result)
            return results
    finally:
        await mongo.close()


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.reads", description=__doc__)
    parser.add_argument("--small", type=positive_int, default=1000, help="passes, first run")
    parser.add_argument("--large", type=positive_int, default=100_000, help="passes, second run")
    parser.add_argument("--requests", type=positive_int, default=200, help="requests per query")
    parser.add_argument(
        "--budget",
        type=positive_int,
        default=30,
        help="seconds per query and size; a slow query stops early (at least 5 requests)",
    )
    args = parser.parse_args(argv)
    if args.large <= args.small:
        parser.error("--large must be more than --small")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    with (
        tempfile.TemporaryDirectory(prefix="tessera-bench-") as work_dir,
        running_stack(Path(work_dir)) as stack,
    ):
        small, large = asyncio.run(drive(stack, args.small, args.large, args.requests, args.budget))
    print(f"\nlatency in ms, one request at a time, up to {args.requests} per query:")
    print(ratio_table(small.passes, large.passes, small.latencies, large.latencies))
    document = {
        "benchmark": "reads",
        "requests_per_query": args.requests,
        "budget_seconds_per_query": args.budget,
        "page_limit": PAGE_LIMIT,
        "sizes": [asdict(small), asdict(large)],
        "ratios_large_over_small": ratios(small.latencies, large.latencies),
        "store": f"secantusdb {metadata.version('secantusdb')}",
        "machine": machine_facts(),
    }
    print(f"\nwrote {write_results('reads', document)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
