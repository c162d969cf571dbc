"""What a document costs the store: CPU per document written, by operation and index count.

Run with `python -m bench.store_costs [--documents 2000] [--shipped]`. It starts the embedded
store as `tessera up` starts it (secantusd-py with `--sync-on-commit`, tessera/processes.py;
with `--shipped`, without tessera/secantusd.py's fix of its retryable-write records) on a fresh
data directory, then times, by the store process's own CPU (from /proc), writes of
`--documents` documents: single and batched inserts, inserts into collections of pass-like
documents with 1, 5 and 10 indexes (the `passes` collection has 10), updates and replaces by
`_id` alone and by `_id` and `version` (the optimistic check), reads by `_id` `$in`, batched
deletes, committed transactions, and retryable writes before and past the 10,000 whose replies
the store keeps. These are the numbers docs/performance.md reasons with: on the development
store a command costs a fixed part before its first document, every index costs each document
written, and a filter other than `_id` alone costs a query plan per statement. Linux only (CPU
from /proc). Numbers go to bench/results/store_costs.json.
"""

import argparse
import asyncio
import os
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from pymongo import ASCENDING, DESCENDING, AsyncMongoClient, ReplaceOne, UpdateOne
from pymongo.asynchronous.collection import AsyncCollection

from bench.pkpass import format_table, machine_facts, write_results
from tessera.processes import free_port, mongo_argv, shipped_store_command

BATCH = 100
SETTLE_SECONDS = 0.2
START_SECONDS = 30.0
RETRYABLE_RECORDS_KEPT = 10_000  # SecantusDB's cap on kept replies of retryable writes
SCOPE = [("account_id", ASCENDING), ("mode", ASCENDING)]
# The indexes of `passes` (services/issuer/repository.py and the stores beside it), in order.
PASS_INDEXES: list[tuple[Any, dict[str, Any]]] = [
    ([*SCOPE, ("_id", DESCENDING)], {}),
    ([*SCOPE, ("template_id", ASCENDING), ("_id", DESCENDING)], {}),
    ([*SCOPE, ("holder_email_key", ASCENDING), ("_id", DESCENDING)], {}),
    ([*SCOPE, ("voided", ASCENDING), ("_id", DESCENDING)], {}),
    ([*SCOPE, ("holder_email", ASCENDING), ("_id", DESCENDING)], {}),
    ("short_id", {"unique": True}),
    ("serial_number", {"unique": True}),
    ([("google_sync_due", ASCENDING)], {"sparse": True}),
    ([*SCOPE, ("barcode_message", ASCENDING)], {}),
]
Document = dict[str, Any]
Collection = AsyncCollection[Document]


def store_cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pass_like(n: int, tag: str) -> Document:
    """A document of the shape and size of a stored pass (its indexed fields all set)."""
    return {
        "_id": f"pass_{tag}_{n:08d}",
        "account_id": "acct_bench",
        "mode": "test",
        "template_id": "tmpl_bench",
        "holder_email": f"holder{n}@example.com",
        "holder_email_key": f"holder{n}@example.com",
        "voided": False,
        "short_id": f"{tag}{n:012d}",
        "serial_number": f"{tag}-{n}",
        "barcode_message": f"{tag}:{n}",
        "version": 1,
        "field_values": {"seat": f"R{n // 20}-{n % 20}"},
        "padding": "x" * 1500,
    }


class Meter:
    """Store CPU per document of each measured step, in milliseconds."""

    def __init__(self, pid: int, documents: int):
        self._pid = pid
        self._documents = documents
        self.rows: list[tuple[str, float]] = []

    async def measure(self, label: str, step: Callable[[], Awaitable[object]]) -> None:
        before = store_cpu_seconds(self._pid)
        await step()
        await asyncio.sleep(SETTLE_SECONDS)  # what the store still does for the step
        spent = store_cpu_seconds(self._pid) - before
        self.rows.append((label, round(spent * 1000 / self._documents, 3)))
        print(f"{label}: {self.rows[-1][1]:.3f} ms", flush=True)


def _ranges(documents: int) -> list[range]:
    return [range(start, min(start + BATCH, documents)) for start in range(0, documents, BATCH)]


async def measure_small_documents(client: AsyncMongoClient[Document], meter: Meter, n: int) -> None:
    collection = client.bench.small
    await collection.create_index("k")

    async def one_by_one() -> None:
        for i in range(n):
            await collection.insert_one({"_id": f"one-{i}", "k": i})

    async def batched() -> None:
        for part in _ranges(n):
            await collection.insert_many([{"_id": f"many-{i}", "k": i} for i in part])

    async def transactions() -> None:
        for i in range(n):
            async with client.start_session() as session, await session.start_transaction():
                await collection.insert_one({"_id": f"tx-{i}", "k": i}, session=session)

    async def updated() -> None:
        for part in _ranges(n):
            ids = [f"many-{i}" for i in part]
            await collection.update_many({"_id": {"$in": ids}}, {"$set": {"s": 1}})

    async def deleted() -> None:
        for part in _ranges(n):
            await collection.delete_many({"_id": {"$in": [f"many-{i}" for i in part]}})

    await meter.measure("insert_one, a small document (2 indexes)", one_by_one)
    await meter.measure(f"insert_many of {BATCH}, a small document", batched)
    await meter.measure("a transaction of one insert, committed", transactions)
    await meter.measure(f"update_many by _id $in {BATCH}", updated)
    await meter.measure(f"delete_many by _id $in {BATCH}", deleted)


async def measure_pass_documents(
    client: AsyncMongoClient[Document], meter: Meter, n: int, indexes: int
) -> None:
    collection: Collection = client.bench[f"passes_{indexes}"]
    for keys, options in PASS_INDEXES[: indexes - 1]:  # and the _id index
        await collection.create_index(keys, **options)
    tag = f"i{indexes}"
    ids = [[f"pass_{tag}_{i:08d}" for i in part] for part in _ranges(n)]

    async def inserted() -> None:
        for part in _ranges(n):
            await collection.insert_many([pass_like(i, tag) for i in part])

    async def by_version(version: int) -> None:
        for part in _ranges(n):
            await collection.bulk_write(
                [
                    ReplaceOne(
                        {"_id": f"pass_{tag}_{i:08d}", "version": version},
                        pass_like(i, tag) | {"version": version + 1},
                    )
                    for i in part
                ]
            )

    async def by_id(version: int) -> None:
        for part in _ranges(n):
            await collection.bulk_write(
                [
                    ReplaceOne(
                        {"_id": f"pass_{tag}_{i:08d}"}, pass_like(i, tag) | {"version": version}
                    )
                    for i in part
                ]
            )

    async def set_by_id() -> None:
        for part in ids:
            await collection.bulk_write([UpdateOne({"_id": i}, {"$inc": {"n": 1}}) for i in part])

    async def versions_read() -> None:
        for part in ids:
            await collection.find({"_id": {"$in": part}}, {"version": 1}).to_list()

    await meter.measure(f"insert_many of pass-like documents, {indexes} indexes", inserted)
    await meter.measure(
        f"bulk ReplaceOne by _id and version, {indexes} indexes", lambda: by_version(1)
    )
    await meter.measure(f"bulk ReplaceOne by _id, {indexes} indexes", lambda: by_id(3))
    await meter.measure(f"bulk UpdateOne $inc by _id, {indexes} indexes", set_by_id)
    await meter.measure(f"find of the versions by _id $in {BATCH}", versions_read)


async def measure_retryable_writes(
    client: AsyncMongoClient[Document], meter: Meter, n: int
) -> None:
    """A write outside a transaction (a retryable write: PyMongo sends it with a `txnNumber`,
    and the store keeps its reply for 30 minutes, at most 10,000 of them), when few were taken
    before it and when more than 10,000 were (tessera/secantusd.py)."""
    collection = client.bench.retryable
    taken = 0

    async def written(count: int) -> None:
        nonlocal taken
        for i in range(count):
            await collection.update_one({"_id": i % BATCH}, {"$inc": {"n": 1}}, upsert=True)
        taken += count

    await meter.measure("update_one by _id (a retryable write)", partial(written, n))
    await written(max(0, RETRYABLE_RECORDS_KEPT - taken))
    await meter.measure(
        f"update_one by _id (retryable), past {RETRYABLE_RECORDS_KEPT:,} in 30 min",
        partial(written, n),
    )


async def drive(port: int, pid: int, documents: int) -> list[tuple[str, float]]:
    client: AsyncMongoClient[Document] = AsyncMongoClient(
        f"mongodb://127.0.0.1:{port}/?directConnection=true"
    )
    try:
        deadline = time.monotonic() + START_SECONDS
        while True:
            try:
                await client.admin.command("ping")
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.1)
        meter = Meter(pid, documents)
        await measure_small_documents(client, meter, documents)
        for indexes in (1, 5, 10):
            await measure_pass_documents(client, meter, documents, indexes)
        await measure_retryable_writes(client, meter, documents)
        return meter.rows
    finally:
        await client.close()


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.store_costs", description=__doc__)
    parser.add_argument("--documents", type=int, default=2000, help="documents per step")
    parser.add_argument(
        "--shipped",
        action="store_true",
        help="run secantusd-py as SecantusDB ships it, not as tessera up runs it",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-store-") as data:
        port = free_port()
        command = shipped_store_command() if args.shipped else None
        store = subprocess.Popen(mongo_argv("127.0.0.1", port, Path(data), command))
        try:
            rows = asyncio.run(drive(port, store.pid, args.documents))
        finally:
            store.terminate()
            store.wait()
    print(
        format_table(["operation", "store CPU ms per document"], [[r, f"{v:.3f}"] for r, v in rows])
    )
    path = write_results(
        "store_costs",
        {
            "machine": machine_facts(),
            "documents": args.documents,
            "store": "as shipped" if args.shipped else "as tessera up runs it",
            "ms_per_document": dict(rows),
        },
    )
    print(f"written to {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
