"""Run one Python snippet in several processes at once: for "first start" races between
replicas (e.g. two issuers generating the development signing identity together)."""

import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def outputs_of_concurrent_runs(script: str, argument: str, count: int = 4) -> set[str]:
    """Start `count` interpreters on `script` with `argument` as sys.argv[1]; each must succeed.
    Returns the set of their (stripped) standard outputs."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", script, argument],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        for _ in range(count)
    ]
    outputs = [worker.communicate(timeout=60) for worker in workers]
    assert [worker.returncode for worker in workers] == [0] * count, outputs
    return {stdout.decode().strip() for stdout, _ in outputs}
