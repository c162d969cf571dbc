"""Drive the Node scripts in this directory (passkit-generator, pass-js) from tests and bench.

The npm packages are installed on demand with `npm ci` from package-lock.json the first time
they are needed, so CI needs nothing but `node` and `npm` on the PATH. pytest's workers may ask at
the same moment: one installs under a file lock while the others wait, and a marker written after
`npm ci` succeeded (naming the lock file's hash) says the install is whole. `npm ci` deletes
node_modules first, so a second one would pull the packages from under a check already running.
"""

import fcntl
import hashlib
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


_MARKER = Path("node_modules") / ".tessera-installed"
_LOCK = ".npm-install.lock"


def _lock_digest(node_dir: Path) -> str:
    return hashlib.sha256((node_dir / "package-lock.json").read_bytes()).hexdigest()


def _installed(node_dir: Path) -> bool:
    marker = node_dir / _MARKER
    return marker.is_file() and marker.read_text() == _lock_digest(node_dir)


def ensure_installed(timeout_seconds: float = 300.0, node_dir: Path = NODE_DIR) -> None:
    """Run `npm ci` once, unless a whole install of this package-lock.json is already there."""
    if _installed(node_dir):
        return
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("npm not found on PATH")
    with open(node_dir / _LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _installed(node_dir):
            return
        result = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund"],
            cwd=node_dir,
            capture_output=True,
            text=True,
            timeout=timeout_seconds,
            check=False,
        )
        if result.returncode != 0:
            raise RuntimeError(f"npm ci failed in {node_dir}:\n{result.stdout}\n{result.stderr}")
        (node_dir / _MARKER).write_text(_lock_digest(node_dir))


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
