"""Where the end-to-end issue path spends its time: py-spy on api, issuer and store under load.

Run with `python -m bench.profile [--requests 300] [--concurrency 8] [--rate 200]`. Needs
py-spy (`pip install py-spy`; not a project dependency) and permission to ptrace the services
(same user and kernel.yama.ptrace_scope <= 1, or root). It starts `tessera up` like bench.issue,
attaches `py-spy record --format raw` to the api, issuer and store processes, issues the passes with
POST /v1/passes at the given concurrency, stops the profilers and prints, per service, the
functions with the most samples: inclusive (the function or anything it called was running)
and self (the function itself). Idle time (waiting in the event loop) is not sampled. The raw
stacks go to bench/results/profile-<service>.txt (feed them to flamegraph.pl or speedscope), the
tables to bench/results/profile.json. Nothing in the services changes for this.
"""

import argparse
import asyncio
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.issue import create_template, issue_many, positive_int, summarise
from bench.pkpass import RESULTS_DIR, format_table, machine_facts, write_results
from bench.stack import REPO_ROOT, Stack, new_client, running_stack

# Service -> (what its command line contains, the code its inclusive table is about).
PROFILED: dict[str, tuple[str, tuple[str, ...]]] = {
    "api": ("services.api", ("services/", "shared/")),
    "issuer": ("services.issuer", ("services/", "shared/")),
    "store": ("secantusd", ("secantus/",)),
}
TOP = 25
SETTLE_SECONDS = 1.0
# One frame of py-spy's raw output: "function (path/to/file.py:123)".
FRAME = re.compile(r"^(?P<function>.*) \((?P<file>[^():]+)(?::\d+)?\)$")


@dataclass(frozen=True)
class Hotspot:
    function: str
    inclusive_pct: float
    self_pct: float


def frame_name(frame: str) -> str:
    """`function (file:line)` -> `function (short/file.py)`: one name per function."""
    match = FRAME.match(frame.strip())
    if match is None:
        return frame.strip()
    path = match["file"].removeprefix(f"{REPO_ROOT}/")
    for marker in ("site-packages/", "lib/python3."):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    return f"{match['function']} ({path})"


def hotspots(
    lines: Iterable[str], top: int = TOP, keep: tuple[str, ...] = ()
) -> tuple[int, list[Hotspot]]:
    """Aggregate py-spy raw (collapsed) stacks; returns total samples and the top functions.

    With `keep`, only functions whose short file path starts with one of its prefixes rank
    (the project's own code rather than the event loop and framework frames above it).
    """
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    total = 0
    for line in lines:
        stack, _, count_text = line.rstrip().rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        total += count
        # The first element is the thread; frames follow, outermost first.
        frames = [frame_name(frame) for frame in stack.split(";")[1:]]
        for name in set(frames):
            if not keep or name.rpartition("(")[2].startswith(keep):
                inclusive[name] += count
        if frames:
            own[frames[-1]] += count
    if total == 0:
        return 0, []
    ranked = sorted(inclusive, key=lambda name: (-inclusive[name], -own[name], name))[:top]
    return total, [
        Hotspot(
            function=name,
            inclusive_pct=round(100.0 * inclusive[name] / total, 1),
            self_pct=round(100.0 * own[name] / total, 1),
        )
        for name in ranked
    ]


def top_self(lines: Iterable[str], top: int = TOP) -> list[Hotspot]:
    """The functions with the most samples of their own (leaf frames)."""
    collected = list(lines)
    total, _ = hotspots(collected, 0)
    own: Counter[str] = Counter()
    for line in collected:
        stack, _, count_text = line.rstrip().rpartition(" ")
        if stack and count_text.isdigit():
            own[frame_name(stack.split(";")[-1])] += int(count_text)
    return [
        Hotspot(function=name, inclusive_pct=0.0, self_pct=round(100.0 * count / total, 1))
        for name, count in own.most_common(top)
    ]


def hotspot_table(spots: Sequence[Hotspot]) -> str:
    rows = [[f"{s.inclusive_pct:.1f}", f"{s.self_pct:.1f}", s.function] for s in spots]
    table = format_table(["incl %", "self %", "function"], rows)
    # The function column reads better left-aligned.
    return "\n".join(line.rstrip() for line in table.splitlines())


def service_pid(stack: Stack, wanted: str) -> int:
    """The pid of the child of `tessera up` whose command line has an argument ending `wanted`."""
    for proc_dir in Path("/proc").iterdir():
        if not proc_dir.name.isdigit():
            continue
        try:
            argv = (proc_dir / "cmdline").read_bytes().split(b"\0")
            ppid = int((proc_dir / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == stack.proc.pid and any(arg.endswith(wanted.encode()) for arg in argv):
            return int(proc_dir.name)
    raise RuntimeError(f"no {wanted} process under tessera up (pid {stack.proc.pid})")


def start_profiler(py_spy: str, pid: int, out: Path, rate: int) -> subprocess.Popen[bytes]:
    argv = [py_spy, "record", "--pid", str(pid), "--rate", str(rate), "--format", "raw"]
    argv += ["--output", str(out), "--nonblocking"]
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def stop_profiler(proc: subprocess.Popen[bytes]) -> None:
    """py-spy writes its output on SIGINT."""
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    if proc.returncode not in (0, -signal.SIGINT):
        raise RuntimeError(f"py-spy failed ({proc.returncode}): {err.decode(errors='replace')}")


@dataclass(frozen=True)
class Sampling:
    py_spy: str
    rate: int
    out_dir: Path


async def load(
    stack: Stack, requests: int, concurrency: int, sampling: Sampling
) -> dict[str, object]:
    async with new_client(stack, concurrency) as client:
        template_id = await create_template(client)
        await issue_many(client, template_id, 10, 1, 0)  # warm-up, before profiling starts
        profilers = [
            start_profiler(
                sampling.py_spy,
                service_pid(stack, marker),
                sampling.out_dir / f"{name}.txt",
                sampling.rate,
            )
            for name, (marker, _) in PROFILED.items()
        ]
        try:
            await asyncio.sleep(SETTLE_SECONDS)
            outcome, seconds = await issue_many(client, template_id, requests, concurrency, 10)
        finally:
            for profiler in profilers:
                stop_profiler(profiler)
    return asdict(summarise(requests, concurrency, outcome, seconds))


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.profile", description=__doc__)
    parser.add_argument("--requests", type=positive_int, default=300)
    parser.add_argument("--concurrency", type=positive_int, default=8)
    parser.add_argument("--rate", type=positive_int, default=200, help="samples per second")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    found = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(found).exists():
        print("py-spy not found: pip install py-spy", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="tessera-profile-") as work_dir:
        work = Path(work_dir)
        sampling = Sampling(py_spy=found, rate=args.rate, out_dir=work)
        started = time.monotonic()
        with running_stack(work) as stack:
            level = asyncio.run(load(stack, args.requests, args.concurrency, sampling))
        print(f"load: {level}  ({time.monotonic() - started:.0f} s with start and stop)")
        services: dict[str, object] = {}
        for name, (_, keep) in PROFILED.items():
            raw = (work / f"{name}.txt").read_text().splitlines()
            RESULTS_DIR.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(work / f"{name}.txt", RESULTS_DIR / f"profile-{name}.txt")
            total, inclusive = hotspots(raw, keep=keep)
            own = top_self(raw)
            print(f"\n{name}: {total} samples while busy; its own code by inclusive time")
            print(hotspot_table(inclusive))
            print(f"\n{name}: by self time")
            print(hotspot_table(own))
            services[name] = {
                "samples": total,
                "inclusive": [asdict(s) for s in inclusive],
                "self": [asdict(s) for s in own],
            }
    document = {
        "benchmark": "profile",
        "requests": args.requests,
        "concurrency": args.concurrency,
        "rate_hz": args.rate,
        "load": level,
        "services": services,
        "machine": machine_facts(),
    }
    print(f"\nwrote {write_results('profile', document)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
