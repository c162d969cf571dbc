"""The README walk-through works verbatim (only the port differs) against a running stack."""

import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.support.stack import Stack

pytestmark = pytest.mark.e2e
README = Path(__file__).resolve().parents[2] / "README.md"


def walkthrough_script() -> str:
    text = README.read_text()
    section = text.split("<!-- walkthrough:start -->")[1].split("<!-- walkthrough:end -->")[0]
    return "\n".join(re.findall(r"```sh\n(.*?)```", section, flags=re.DOTALL))


def test_readme_walkthrough_runs_verbatim(stack: Stack, tmp_path: Path) -> None:
    account = stack.new_account()
    script = walkthrough_script().replace("http://127.0.0.1:8000", stack.base_url)
    result = subprocess.run(
        ["/bin/bash", "-euo", "pipefail", "-c", script],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin:/usr/local/bin", "TESSERA_KEY": account.test_key},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "200 application/vnd.apple.pkpass" in result.stdout
    assert "pass.json" in result.stdout
    assert "signature" in result.stdout
    issued = json.loads((tmp_path / "pass.json").read_text())
    assert issued["field_values"] == {"seat": "F12"}
    last_line = result.stdout.strip().splitlines()[-1]
    assert json.loads(last_line)["voided"] is True
    assert '"error"' not in result.stdout
