"""ensure_installed: one `npm ci` however many pytest workers ask at once, and none after it."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.node import harness

ROOT = Path(__file__).resolve().parents[2]
# A stand-in for npm that counts its runs and takes a while, as `npm ci` does, so that a second
# caller arrives while the first install is under way.
FAKE_NPM = """#!/bin/sh
echo run >> "$PWD/npm-runs"
sleep 1
[ -f "$PWD/npm-fails" ] && exit 1
mkdir -p node_modules/passkit-generator
"""


@pytest.fixture
def node_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "node"
    directory.mkdir()
    (directory / "package-lock.json").write_text('{"lockfileVersion": 3}')
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    npm = bin_dir / "npm"
    npm.write_text(FAKE_NPM)
    npm.chmod(0o755)
    return directory


def _ensure_in_processes(node_dir: Path, count: int) -> list[int]:
    env = {**os.environ, "PATH": f"{node_dir.parent / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    code = (
        "import sys; from pathlib import Path; from tests.node import harness; "
        "harness.ensure_installed(node_dir=Path(sys.argv[1]))"
    )
    runs = [
        subprocess.Popen([sys.executable, "-c", code, str(node_dir)], cwd=ROOT, env=env)
        for _ in range(count)
    ]
    return [run.wait(timeout=60) for run in runs]


def _npm_runs(node_dir: Path) -> int:
    runs = node_dir / "npm-runs"
    return len(runs.read_text().splitlines()) if runs.exists() else 0


def test_workers_asking_at_once_get_one_install_and_all_wait_for_it(node_dir: Path) -> None:
    assert _ensure_in_processes(node_dir, 3) == [0, 0, 0]

    assert _npm_runs(node_dir) == 1
    assert _ensure_in_processes(node_dir, 1) == [0]
    assert _npm_runs(node_dir) == 1


def test_a_failed_install_is_tried_again_and_a_changed_lock_file_reinstalls(
    node_dir: Path,
) -> None:
    (node_dir / "npm-fails").touch()
    assert _ensure_in_processes(node_dir, 1) == [1]
    (node_dir / "npm-fails").unlink()
    assert _ensure_in_processes(node_dir, 1) == [0]
    assert _npm_runs(node_dir) == 2

    (node_dir / "package-lock.json").write_text('{"lockfileVersion": 3, "changed": true}')
    assert _ensure_in_processes(node_dir, 1) == [0]
    assert _npm_runs(node_dir) == 3


def test_the_real_install_is_whole() -> None:
    reason = harness.missing_tools()
    if reason is not None:
        pytest.skip(reason)
    harness.ensure_installed()

    assert (harness.NODE_DIR / "node_modules" / "joi" / "package.json").is_file()
    assert (harness.NODE_DIR / "node_modules" / "do-not-zip" / "package.json").is_file()
