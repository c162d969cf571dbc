"""Drive the Node scripts in this directory (passkit-generator, pass-js) from tests and bench.

The npm packages are installed on demand with `npm ci` from package-lock.json the first time
they are needed, so CI needs nothing but `node` and `npm` on the PATH.
"""

import io
import json
import shutil
import subprocess
import zipfile
from pathlib import Path
from typing import Any

NODE_DIR = Path(__file__).resolve().parent
_SIGNING_FILES = (
    ("--signer-cert", "signer.pem"),
    ("--signer-key", "signer-key.pem"),
    ("--wwdr", "wwdr.pem"),
)


def missing_tools() -> str | None:
    """Why the Node checks cannot run here, or None when `node` and `npm` are available."""
    absent = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
    return f"{' and '.join(absent)} not found on PATH" if absent else None


def _installed(name: str) -> str | None:
    package = NODE_DIR / "node_modules" / name / "package.json"
    if not package.is_file():
        return None
    version: str = json.loads(package.read_text())["version"]
    return version


def ensure_installed(timeout_seconds: float = 300.0) -> None:
    """Run `npm ci` unless every pinned package is already installed at its version."""
    pinned: dict[str, str] = json.loads((NODE_DIR / "package.json").read_text())["dependencies"]
    if all(_installed(name) == version for name, version in pinned.items()):
        return
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("npm not found on PATH")
    result = subprocess.run(
        [npm, "ci", "--no-audit", "--no-fund"],
        cwd=NODE_DIR,
        capture_output=True,
        text=True,
        timeout=timeout_seconds,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"npm ci failed in {NODE_DIR}:\n{result.stdout}\n{result.stderr}")


def write_model(pkpass: bytes, parent: Path, name: str = "model") -> Path:
    """Unzip a .pkpass's pass.json, images and .lproj folders into `<parent>/<name>.pass`.

    passkit-generator treats a model path without an extension as `<path>.pass`, so the
    directory gets that extension. manifest.json and signature are left out: it makes its own.
    """
    model = parent / f"{name}.pass"
    with zipfile.ZipFile(io.BytesIO(pkpass)) as archive:
        for member in archive.namelist():
            if member in ("manifest.json", "signature"):
                continue
            target = model / member
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(archive.read(member))
    return model


def signing_args(signing_dir: Path) -> list[str]:
    """The certificate options of both scripts, from an `ensure_dev_identity` directory."""
    args: list[str] = []
    for option, file_name in _SIGNING_FILES:
        args += [option, str(signing_dir / file_name)]
    return args


def run_script(script: str, *args: str, timeout_seconds: float = 120.0) -> dict[str, Any]:
    """Run `node <script> <args>` in this directory and parse the JSON it prints."""
    node = shutil.which("node")
    if node is None:
        raise RuntimeError("node not found on PATH")
    result = subprocess.run(
        [node, str(NODE_DIR / script), *args],
        cwd=NODE_DIR,
        capture_output=True,
        text=True,
        timeout=timeout_seconds,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"node {script} exited {result.returncode}:\n{result.stderr}")
    report: dict[str, Any] = json.loads(result.stdout)
    return report
