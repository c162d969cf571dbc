"""A downloaded .pkpass checked as Wallet would: every file's SHA-1 in the manifest, and the
manifest's signature verified by `openssl cms -verify` against the stack's root CA."""

import hashlib
import io
import json
import shutil
import subprocess
import zipfile
from pathlib import Path
from typing import Any

OPENSSL = shutil.which("openssl")


def verified_pass_json(pkpass: bytes, root_ca: Path, folder: Path) -> dict[str, Any]:
    """The pass.json of a .pkpass whose manifest and signature check out (else AssertionError)."""
    assert OPENSSL is not None, "openssl is required"
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(io.BytesIO(pkpass)) as archive:
        archive.extractall(folder)
        names = set(archive.namelist())
    manifest = json.loads((folder / "manifest.json").read_text())
    assert set(manifest) == names - {"manifest.json", "signature"}
    for name, digest in manifest.items():
        assert hashlib.sha1((folder / name).read_bytes()).hexdigest() == digest, name
    checked = subprocess.run(
        [
            OPENSSL, "cms", "-verify", "-binary", "-inform", "DER",
            "-in", str(folder / "signature"), "-content", str(folder / "manifest.json"),
            "-CAfile", str(root_ca), "-purpose", "any", "-out", "/dev/null",
        ],
        capture_output=True,
        check=False,
    )  # fmt: skip
    assert checked.returncode == 0, checked.stderr.decode(errors="replace")
    pass_json: dict[str, Any] = json.loads((folder / "pass.json").read_text())
    return pass_json
