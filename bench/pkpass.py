"""Single-process `.pkpass` build rate: render, sign and zip one eventTicket pass repeatedly.

Run with `python -m bench.pkpass [--seconds 5]`. After a short warm-up the same pass (a design
with four fields and a QR barcode, signed with a throwaway development identity) is built for
the given duration. Then the same pass (our pass.json and icons, the same identity) is built and
signed by passkit-generator under Node for the same duration (tests/node/bench_pkpass.mjs), and
the ratio of the two rates is printed; that half is skipped, with the reason, when Node is not
available. A table is printed and the numbers, with the machine facts, are written to
bench/results/pkpass.json. The helpers here (percentiles, tables, machine facts, JSON output)
are shared with bench.issue.
"""

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from services.issuer.pkpass import PassContent, build_pkpass
from shared.apple_identity import SigningIdentity, ensure_dev_identity
from shared.design import Design
from tests.node import harness

RESULTS_DIR = Path(__file__).resolve().parent / "results"
WARMUP_BUILDS = 20
WEB_SERVICE_URL = "http://127.0.0.1:8001"

# The design both benchmarks use: four fields and a QR barcode (as in the README walk-through).
EVENT_DESIGN: dict[str, Any] = {
    "organization_name": "Acme Live",
    "description": "Summer Concert ticket",
    "colors": {"background": "#1E3A8A", "foreground": "#FFFFFF", "label": "#BFDBFE"},
    "fields": [
        {"key": "event", "label": "Event", "slot": "primary", "default": "Summer Concert"},
        {"key": "date", "label": "Date", "slot": "secondary", "default": "2025-07-12 19:30"},
        {"key": "seat", "label": "Seat", "slot": "secondary"},
        {"key": "gate", "label": "Gate", "slot": "auxiliary", "default": "A"},
    ],
    "barcode": {"format": "qr", "message": "{serial_number}"},
}


@dataclass(frozen=True)
class BuildStats:
    """The outcome of one timed build run."""

    builds: int
    seconds: float
    builds_per_second: float
    mean_ms: float
    p50_ms: float
    p99_ms: float
    pass_bytes: int


def percentile(values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile of `values` (0 < fraction <= 1); 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


def machine_facts() -> dict[str, Any]:
    """Where the numbers were measured."""
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "python_version": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "cpu_count": os.cpu_count(),
    }


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A plain-text table with right-aligned columns."""
    widths = [len(header) for header in headers]
    for row in rows:
        widths = [max(width, len(cell)) for width, cell in zip(widths, row, strict=True)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(cell.rjust(width) for cell, width in zip(cells, widths, strict=True))

    rule = "  ".join("-" * width for width in widths)
    return "\n".join([line(headers), rule, *(line(row) for row in rows)])


def write_results(name: str, document: dict[str, Any]) -> Path:
    """Write `document` to bench/results/<name>.json and return the path."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{name}.json"
    path.write_text(json.dumps(document, indent=2) + "\n")
    return path


def event_ticket() -> PassContent:
    """The pass every build renders."""
    return PassContent(
        apple_style="eventTicket",
        design=Design.model_validate(EVENT_DESIGN),
        serial_number="6f1c2a9e-0b7d-4c1e-9a55-3d2f8e4b7c10",
        short_id="bench0000001",
        field_values={"seat": "F12"},
        holder_name="Ada Lovelace",
        authentication_token="bench-authentication-token-0001",  # noqa: S106 - not a secret
        web_service_url=WEB_SERVICE_URL,
        voided=False,
    )


def time_builds(content: PassContent, identity: SigningIdentity, seconds: float) -> BuildStats:
    """Build `content` back to back for `seconds` and time every build."""
    durations: list[float] = []
    size = 0
    start = time.perf_counter()
    deadline = start + seconds
    while True:
        before = time.perf_counter()
        size = len(build_pkpass(content, identity))
        after = time.perf_counter()
        durations.append(after - before)
        if after >= deadline:
            break
    elapsed = time.perf_counter() - start
    return _stats(durations, elapsed, size)


def _stats(durations: list[float], elapsed: float, size: int) -> BuildStats:
    millis = [duration * 1000.0 for duration in durations]
    return BuildStats(
        builds=len(durations),
        seconds=round(elapsed, 3),
        builds_per_second=round(len(durations) / elapsed, 1),
        mean_ms=round(sum(millis) / len(millis), 3),
        p50_ms=round(percentile(millis, 0.50), 3),
        p99_ms=round(percentile(millis, 0.99), 3),
        pass_bytes=size,
    )


def run_build_benchmark(seconds: float, warmup: int = WARMUP_BUILDS) -> BuildStats:
    """Create a throwaway identity, warm up, then time builds for `seconds`."""
    with tempfile.TemporaryDirectory(prefix="tessera-bench-signing-") as directory:
        identity = ensure_dev_identity(Path(directory))
    return _python_builds(identity, seconds, warmup)


def _python_builds(identity: SigningIdentity, seconds: float, warmup: int) -> BuildStats:
    content = event_ticket()
    for _ in range(warmup):
        build_pkpass(content, identity)
    return time_builds(content, identity, seconds)


def run_node_benchmark(
    signing_dir: Path, identity: SigningIdentity, seconds: float, warmup: int = WARMUP_BUILDS
) -> tuple[BuildStats, dict[str, Any]] | str:
    """Time passkit-generator building the same pass; a reason string when it cannot run."""
    reason = harness.missing_tools()
    if reason is not None:
        return reason
    try:
        harness.ensure_installed()
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        return f"cannot install passkit-generator: {exc}"
    with tempfile.TemporaryDirectory(prefix="tessera-bench-model-") as directory:
        model = harness.write_model(build_pkpass(event_ticket(), identity), Path(directory))
        args = [str(model), *harness.signing_args(signing_dir)]
        args += ["--seconds", str(seconds), "--warmup", str(warmup)]
        report = harness.run_script("bench_pkpass.mjs", *args, timeout_seconds=seconds * 4 + 120)
    return BuildStats(**report["results"]), report["runtime"]


def stats_table(stats: BuildStats, node: BuildStats | None = None) -> str:
    """One row for Tessera (Python); a second for passkit-generator (Node) when given."""
    headers = ["builds", "seconds", "builds/s", "mean ms", "p50 ms", "p99 ms"]
    runs = [stats] if node is None else [stats, node]
    rows = [
        [
            str(run.builds),
            f"{run.seconds:.2f}",
            f"{run.builds_per_second:.1f}",
            f"{run.mean_ms:.3f}",
            f"{run.p50_ms:.3f}",
            f"{run.p99_ms:.3f}",
        ]
        for run in runs
    ]
    if node is None:
        return format_table(headers, rows)
    labelled = [
        [label, *row]
        for label, row in zip(("tessera (python)", "passkit-generator (node)"), rows, strict=True)
    ]
    return format_table(["build", *headers], labelled)


def _positive_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
    return value


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.pkpass", description=__doc__)
    parser.add_argument("--seconds", type=_positive_float, default=5.0, help="timed duration")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    seconds: float = args.seconds
    print(f"pkpass build rate: {WARMUP_BUILDS} warm-up builds, then {seconds:g} s", flush=True)
    with tempfile.TemporaryDirectory(prefix="tessera-bench-signing-") as directory:
        signing_dir = Path(directory)
        identity = ensure_dev_identity(signing_dir)
        stats = _python_builds(identity, seconds, WARMUP_BUILDS)
        print(stats_table(stats))
        print(f"pass size: {stats.pass_bytes} bytes")
        print(f"passkit-generator under Node: the same pass for {seconds:g} s", flush=True)
        node = run_node_benchmark(signing_dir, identity, seconds)
    document: dict[str, Any] = {
        "benchmark": "pkpass",
        "warmup_builds": WARMUP_BUILDS,
        "requested_seconds": seconds,
        "results": asdict(stats),
        "machine": machine_facts(),
    }
    if isinstance(node, str):
        print(f"skipped the Node half: {node}")
        document["node"] = {"skipped": node}
    else:
        node_stats, runtime = node
        ratio = round(stats.builds_per_second / node_stats.builds_per_second, 2)
        print(stats_table(stats, node_stats))
        print(f"ratio python/node: {ratio:.2f} (builds/s of Tessera over passkit-generator)")
        document["node"] = {"results": asdict(node_stats), **runtime}
        document["ratio_python_to_node"] = ratio
    print(f"wrote {write_results('pkpass', document)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
