"""A long run of steady issuing: does anything grow or slow down as a stack keeps working?

Run with `python -m bench.soak [--rounds 7] [--passes 4000] [--concurrency 8]`. It starts
`tessera up` as bench.issue does, subscribes one webhook (`pass.issued`) on the bench's own
receiver (bench/receiver.py), and issues `--passes` passes with POST /v1/passes per round, each
with an Idempotency-Key. After each round it prints the round's passes/s and latency, the CPU
each process spent per pass (bench/cpu.py) and each process's resident memory. A process whose
memory grows round after round leaks; a process whose CPU per pass grows while the bench's own
(the load generator's, whose work per pass never changes) stays flat has a cost that grows
with what it has done: the embedded store's retryable-write records did that until
tessera/secantusd.py (docs/performance.md). When every process's CPU per pass moves together,
including the bench's, the machine's speed moved. Numbers go to bench/results/soak.json.
"""

import argparse
import asyncio
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from bench import cpu
from bench.issue import create_template, issue_many, positive_int
from bench.pkpass import machine_facts, percentile, write_results
from bench.stack import Stack, new_client, running_stack
from bench.webhooks import receiver

WEBHOOK_PATH = "/level-soak/hook"


@dataclass
class Round:
    passes: int
    errors: int
    passes_per_second: float
    p50_ms: float
    p99_ms: float
    cpu_ms_per_pass: dict[str, float]
    resident_mb: dict[str, int]


def resident_mb(launcher: int) -> dict[str, int]:
    """Resident memory of the stack's processes by name (bench/cpu.py's names), in MB."""
    sizes: dict[str, int] = {}
    for process in cpu.stack_processes(launcher):
        status = (process.path / "status").read_text()
        kilobytes = next(line for line in status.splitlines() if line.startswith("VmRSS:"))
        sizes[process.name] = sizes.get(process.name, 0) + int(kilobytes.split()[1]) // 1024
    return dict(sorted(sizes.items()))


async def drive(stack: Stack, hook_url: str, args: argparse.Namespace) -> list[Round]:
    rounds: list[Round] = []
    async with new_client(stack, args.concurrency) as client:
        body = {"url": hook_url, "events": ["pass.issued"]}
        (await client.post("/v1/webhooks", json=body)).raise_for_status()
        template_id = await create_template(client)
        for number in range(args.rounds):
            before = cpu.stack_cpu(stack.proc.pid)
            first = number * args.passes
            outcome, seconds = await issue_many(
                client, template_id, args.passes, args.concurrency, first
            )
            issued = len(outcome.pass_ids)
            rounds.append(
                Round(
                    passes=issued,
                    errors=len(outcome.errors),
                    passes_per_second=round(issued / seconds, 1),
                    p50_ms=round(percentile(outcome.latencies_ms, 0.50), 1),
                    p99_ms=round(percentile(outcome.latencies_ms, 0.99), 1),
                    cpu_ms_per_pass=cpu.per_pass_ms(
                        before, cpu.stack_cpu(stack.proc.pid), max(issued, 1)
                    ),
                    resident_mb=resident_mb(stack.proc.pid),
                )
            )
            print(f"round {number + 1}: {rounds[-1]}", flush=True)
    return rounds


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__)
    parser.add_argument("--rounds", type=positive_int, default=7)
    parser.add_argument("--passes", type=positive_int, default=4000, help="passes per round")
    parser.add_argument("--concurrency", type=positive_int, default=8)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    with (
        tempfile.TemporaryDirectory(prefix="tessera-soak-") as work_dir,
        receiver(Path(work_dir)) as (base, _arrivals),
        running_stack(Path(work_dir)) as stack,
    ):
        rounds = asyncio.run(drive(stack, base + WEBHOOK_PATH, args))
    document = {
        "benchmark": "soak",
        "passes_per_round": args.passes,
        "concurrency": args.concurrency,
        "rounds": [asdict(r) for r in rounds],
        "machine": machine_facts(),
    }
    print(f"wrote {write_results('soak', document)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
