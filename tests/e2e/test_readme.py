"""The README walk-through works verbatim against a running stack.

Two things differ from a person at a terminal: the port, and the one-minute wait for the
download link to expire. The api runs in this process with a clock the test controls, and the
script's `sleep 61` becomes "tell the test, which moves the api's clock 61 seconds".
"""

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.inproc_api import InProcessApi, ManualClock, running_api
from tests.support.polling import poll
from tests.support.stack import Stack

pytestmark = pytest.mark.e2e
README = Path(__file__).resolve().parents[2] / "README.md"
WAIT = "sleep 61"


def walkthrough_script() -> str:
    text = README.read_text()
    section = text.split("<!-- walkthrough:start -->")[1].split("<!-- walkthrough:end -->")[0]
    return "\n".join(re.findall(r"```sh\n(.*?)```", section, flags=re.DOTALL))


def test_readme_walkthrough_runs_verbatim_twice_in_a_row(stack: Stack, tmp_path: Path) -> None:
    """Issue 16: a second run with the same key and stack works as the first did (it failed
    with 409 when the Idempotency-Key was fixed)."""
    account = stack.new_account()
    with running_api(stack, ManualClock()) as api:
        issued = [_run_walkthrough(api, account.test_key, tmp_path / run) for run in ("1", "2")]
    assert issued[0]["id"] != issued[1]["id"]


def _run_walkthrough(api: InProcessApi, key: str, work_dir: Path) -> dict[str, Any]:
    """Run the script in `work_dir`, check what it printed, and answer the pass it issued."""
    work_dir.mkdir()
    script = walkthrough_script()
    assert script.count(WAIT) == 1
    fifo = work_dir / "clock.fifo"
    os.mkfifo(fifo)
    asked = work_dir / "clock.asked"
    script = script.replace(WAIT, f'touch "{asked}"; read -r _ < "{fifo}"')
    script = script.replace("http://127.0.0.1:8000", api.base_url)
    process = subprocess.Popen(
        ["/bin/bash", "-euo", "pipefail", "-c", script],
        cwd=work_dir,
        env={"PATH": "/usr/bin:/bin:/usr/local/bin", "TESSERA_KEY": key},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    poll(lambda: asked.exists() or process.poll() is not None, timeout=60)
    # Opening the FIFO would block forever if the script had already failed.
    assert process.poll() is None, process.communicate()[1]
    api.clock.advance(61)
    with fifo.open("w") as release:
        release.write("go\n")
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 0, stderr
    assert "200 application/vnd.apple.pkpass" in stdout
    assert "pass.json" in stdout
    assert "signature" in stdout
    issued: dict[str, Any] = json.loads((work_dir / "pass.json").read_text())
    assert issued["field_values"] == {"seat": "F12"}
    lines = stdout.strip().splitlines()
    assert lines[-3:-1] == ["200", "410"]  # the link before and after it expired
    assert json.loads(lines[-1])["voided"] is True
    scans = [json.loads(line) for line in lines if line.startswith('{"id":"scan_')]
    assert [(s["result"], s["reason"]) for s in scans] == [
        ("accepted", None),
        ("rejected", "already_redeemed"),
    ]
    assert '"error"' not in stdout
    assert "Traceback" not in stderr
    return issued
