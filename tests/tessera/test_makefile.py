"""What the Makefile does to a user's machine: `make run` installs no dev tools, `make clean`
keeps the data dir and `make reset-data` is the one target that deletes it. Checked with
`make -n` (print, do not run), so nothing is installed or deleted here."""

import subprocess
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]


def _dry_run(*args: str) -> str:
    # -B: print every recipe as on a fresh clone, whatever this checkout has installed.
    result = subprocess.run(
        ["make", "-n", "-B", "-C", str(ROOT), *args],  # noqa: S607 - make from PATH, as users run it
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    return result.stdout


def test_make_run_installs_the_run_lock_and_no_dev_tools() -> None:
    commands = _dry_run("run")
    assert "-r requirements-run.txt" in commands
    assert "requirements-dev.txt" not in commands
    assert "tessera up" in commands
    lock = (ROOT / "requirements-run.txt").read_text()
    pinned = {canonicalize_name(line.split("==")[0]) for line in lock.splitlines() if "==" in line}
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]

    def names(requirements: list[str]) -> set[str]:
        return {canonicalize_name(Requirement(r).name) for r in requirements}

    # What only the dev extra asks for: the tools (some runtime packages are in it too).
    dev_only = names(extras["dev"]) - names(extras["embedded"]) - names(project["dependencies"])
    assert not pinned & dev_only, pinned & dev_only


def test_make_test_installs_the_dev_lock() -> None:
    assert "-r requirements-dev.txt" in _dry_run("test")


def test_clean_keeps_the_data_dir_and_reset_data_deletes_it() -> None:
    clean = _dry_run("clean")
    assert ".tessera" not in clean
    reset = _dry_run("reset-data")
    assert "rm -rf .tessera" in reset
    assert "signing identity" in reset
