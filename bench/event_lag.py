"""Event lag: how long after a burst of events is published every one of them is recorded.

Run with `python -m bench.event_lag [--events 10000] [--webhooks 0]`. It starts `tessera up`
(bench/stack.py), creates `--webhooks` webhooks of the development account subscribed to every
event (to a closed local port: each event's deliveries are stored, then their attempts fail and
are retried later, which costs the stack CPU meanwhile), publishes
`--events` `created` events of that account straight to the events stream, as the issuer's
outbox relay does after an import (each with its Nats-Msg-Id), and measures from the last
publish acknowledgement until each durable consumer has nothing pending: (a) the events
service's, which acknowledges an event once it is in `pass_events` (counted there at the end, to
be sure), and (b) the webhooks service's, which acknowledges once the event's deliveries are
stored. The consumers' state is asked of NATS, not the store, whose CPU the benchmark measures.
Numbers go to bench/results/event_lag.json.
"""

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

import nats
from nats.js.client import JetStreamContext
from pymongo import AsyncMongoClient

from bench import cpu
from bench.issue import positive_int
from bench.pkpass import machine_facts, write_results
from bench.stack import DATABASE, POLL_INTERVAL, Stack, new_client, running_stack
from shared.ids import new_id
from shared.messages import EVENTS_CONSUMER, EVENTS_STREAM, WEBHOOKS_CONSUMER, PassEventMessage
from shared.models import PassSnapshot

TIMEOUT_SECONDS = 300.0
PUBLISH_CONCURRENCY = 500
CONSUMERS = (EVENTS_CONSUMER, WEBHOOKS_CONSUMER)


@dataclass
class LagResult:
    events: int
    webhooks: int
    publish_seconds: float
    published_per_second: float
    recorded_lag_seconds: float  # last publish ack -> every event in pass_events
    fanned_out_lag_seconds: float  # last publish ack -> webhooks consumer has nothing pending
    # CPU milliseconds per event by process, from the first publish until both were done.
    cpu_ms_per_event: dict[str, float]


def events_of(account_id: str, count: int) -> list[PassEventMessage]:
    now = datetime.now(UTC)
    made = []
    for number in range(count):
        pass_id = new_id("pass")
        snapshot = PassSnapshot(
            id=pass_id,
            short_id=f"s{number}",
            mode="test",
            holder_email=f"holder{number}@example.com",
            holder_name=f"Holder {number}",
            field_values={"seat": str(number)},
            voided=False,
        )
        made.append(
            PassEventMessage(
                id=new_id("pass_event"),
                account_id=account_id,
                mode="test",
                pass_id=pass_id,
                event_type="created",
                created_at=now,
                pass_snapshot=snapshot,
            )
        )
    return made


async def publish_all(js: JetStreamContext, events: list[PassEventMessage]) -> None:
    gate = asyncio.Semaphore(PUBLISH_CONCURRENCY)

    async def one(event: PassEventMessage) -> None:
        async with gate:
            await js.publish(
                event.subject,
                event.model_dump_json().encode(),
                headers={"Nats-Msg-Id": event.id},
            )

    async with asyncio.TaskGroup() as group:
        for event in events:
            group.create_task(one(event))


async def create_webhooks(stack: Stack, count: int) -> None:
    async with new_client(stack, 1) as client:
        for _ in range(count):
            response = await client.post(
                "/v1/webhooks", json={"url": "http://127.0.0.1:9/hook", "events": ["*"]}
            )
            if response.status_code not in (200, 201):
                raise RuntimeError(f"webhook creation failed: {response.status_code}")


async def measure(stack: Stack, count: int, webhooks: int) -> LagResult:
    await create_webhooks(stack, webhooks)
    ready = json.loads((stack.data_dir / "ready.json").read_text())
    connection = await nats.connect(ready["nats_url"])
    mongo: AsyncMongoClient[dict[str, object]] = AsyncMongoClient(stack.mongodb_url)
    try:
        js = connection.jetstream()
        events = events_of(stack.account_id, count)
        cpu_before = cpu.stack_cpu(stack.proc.pid)
        started = time.monotonic()
        await publish_all(js, events)
        published = time.monotonic()
        done: dict[str, float] = {}
        while len(done) < len(CONSUMERS):
            if time.monotonic() - published > TIMEOUT_SECONDS:
                raise TimeoutError("the events were not all consumed in time")
            for consumer in CONSUMERS:
                info = await js.consumer_info(EVENTS_STREAM, consumer)
                if consumer not in done and info.num_pending + info.num_ack_pending == 0:
                    done[consumer] = time.monotonic()
            await asyncio.sleep(POLL_INTERVAL)
        cpu_after = cpu.stack_cpu(stack.proc.pid)
        pass_events = mongo[DATABASE]["pass_events"]
        stored = await pass_events.count_documents({"account_id": stack.account_id})
        if stored != count:
            raise RuntimeError(f"{stored} of {count} events recorded")
    finally:
        await connection.close()
        await mongo.close()
    publish_seconds = published - started
    return LagResult(
        events=count,
        webhooks=webhooks,
        publish_seconds=round(publish_seconds, 3),
        published_per_second=round(count / publish_seconds, 1),
        recorded_lag_seconds=round(done[EVENTS_CONSUMER] - published, 3),
        fanned_out_lag_seconds=round(done[WEBHOOKS_CONSUMER] - published, 3),
        cpu_ms_per_event=cpu.per_pass_ms(cpu_before, cpu_after, count),
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.event_lag", description=__doc__)
    parser.add_argument("--events", type=positive_int, default=10_000)
    parser.add_argument("--webhooks", type=int, default=0, help="webhooks of the account (>= 0)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    with (
        tempfile.TemporaryDirectory(prefix="tessera-bench-") as work_dir,
        running_stack(Path(work_dir)) as stack,
    ):
        result = asyncio.run(measure(stack, args.events, max(0, args.webhooks)))
    print(
        f"{result.events} events published in {result.publish_seconds:.2f} s "
        f"({result.published_per_second:.0f}/s); after the last publish: all recorded in "
        f"{result.recorded_lag_seconds:.2f} s, all fanned out to {result.webhooks} webhook(s) "
        f"in {result.fanned_out_lag_seconds:.2f} s"
    )
    print(f"CPU ms per event: {result.cpu_ms_per_event}")
    document = {"benchmark": "event_lag", **asdict(result), "machine": machine_facts()}
    print(f"wrote {write_results('event_lag', document)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
