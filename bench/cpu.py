"""CPU time of the stack's processes, read from /proc (Linux), to split a run's cost by process.

On a 2-CPU machine the stack (four services, the store, nats-server) and the load generator
share the CPUs, so passes/s is capped by the CPU one pass costs them all together: these
numbers say which process pays it. Elsewhere than Linux the readings are empty.
"""

import os
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
# What a process's command line contains -> the name it is reported under.
NAMES = (
    ("services.api", "api"),
    ("services.issuer", "issuer"),
    ("services.events", "events"),
    ("services.webhooks", "webhooks"),
    ("secantusd", "store"),
    ("nats-server", "nats"),
    ("tessera", "launcher"),
)
CpuSeconds = dict[str, float]


def _ticks() -> int:
    return os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class StackProcess:
    name: str  # from NAMES
    path: Path  # its /proc entry
    stat_fields: list[str]  # /proc/PID/stat after the command name


def stack_processes(launcher: int) -> list[StackProcess]:
    """`launcher` (the stack's `tessera up`) and its children (every service, the store,
    nats-server), named by NAMES."""
    found: list[StackProcess] = []
    for entry in PROC.glob("[0-9]*"):
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue  # gone meanwhile
        fields = stat[stat.rindex(")") + 2 :].split()
        if launcher not in (int(entry.name), int(fields[1])):  # fields[1]: the parent's pid
            continue
        name = next((label for marker, label in NAMES if marker in cmdline), "other")
        found.append(StackProcess(name, entry, fields))
    return found


def stack_cpu(launcher: int) -> CpuSeconds:
    """User + system CPU seconds so far of the stack's processes, by name, plus this process
    ("bench")."""
    totals: CpuSeconds = defaultdict(float)
    ticks = _ticks()
    for process in stack_processes(launcher):
        fields = process.stat_fields
        totals[process.name] += (int(fields[11]) + int(fields[12])) / ticks
    own = os.times()
    totals["bench"] = own.user + own.system
    return dict(totals)


def per_pass_ms(before: CpuSeconds, after: CpuSeconds, passes: int) -> dict[str, float]:
    """CPU milliseconds per pass by process, and their "total"."""
    spent = {name: after.get(name, 0.0) - before.get(name, 0.0) for name in after}
    table = {name: round(seconds * 1000 / passes, 2) for name, seconds in sorted(spent.items())}
    table["total"] = round(sum(spent.values()) * 1000 / passes, 2)
    return table
