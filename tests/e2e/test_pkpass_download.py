"""Acceptance: a downloaded .pkpass verifies with openssl against the development CA."""

import hashlib
import io
import json
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from tests.support.flows import make_template
from tests.support.stack import Stack

pytestmark = pytest.mark.e2e
OPENSSL = shutil.which("openssl")


def _verify(folder: Path, root_ca: Path) -> subprocess.CompletedProcess[bytes]:
    assert OPENSSL is not None, "openssl is required"
    return subprocess.run(
        [
            OPENSSL, "cms", "-verify", "-binary", "-inform", "DER",
            "-in", str(folder / "signature"), "-content", str(folder / "manifest.json"),
            "-CAfile", str(root_ca), "-purpose", "any", "-out", "/dev/null",
        ],
        capture_output=True,
        check=False,
    )  # fmt: skip


def test_downloaded_pkpass_is_signed_and_tamper_evident(stack: Stack, tmp_path: Path) -> None:
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        template = make_template(client)
        issued = client.post(
            "/v1/passes", json={"template_id": template["id"], "field_values": {"seat": "C3"}}
        ).json()
        download = client.get(issued["download_url"])
    assert download.status_code == 200
    assert download.headers["content-type"] == "application/vnd.apple.pkpass"
    assert "filename=" in download.headers["content-disposition"]

    archive = zipfile.ZipFile(io.BytesIO(download.content))
    names = set(archive.namelist())
    assert {"pass.json", "manifest.json", "icon.png", "signature"} <= names
    archive.extractall(tmp_path)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert set(manifest) == names - {"manifest.json", "signature"}
    for name, digest in manifest.items():
        assert hashlib.sha1((tmp_path / name).read_bytes()).hexdigest() == digest  # noqa: S324
    pass_json = json.loads((tmp_path / "pass.json").read_text())
    assert pass_json["serialNumber"] == issued["serial_number"]
    seat = {"key": "seat", "label": "Seat", "value": "C3", "changeMessage": "Changed to %@"}
    assert seat in pass_json["eventTicket"]["primaryFields"]

    root_ca = stack.signing_dir / "root-ca.pem"
    assert _verify(tmp_path, root_ca).returncode == 0

    # Any changed byte is caught: in a file by its manifest digest, in the manifest by openssl.
    for name in sorted(names - {"signature", "manifest.json"}):
        data = bytearray((tmp_path / name).read_bytes())
        data[len(data) // 2] ^= 0x01
        assert hashlib.sha1(bytes(data)).hexdigest() != manifest[name]  # noqa: S324
    manifest_path = tmp_path / "manifest.json"
    data = bytearray(manifest_path.read_bytes())
    data[len(data) // 2] ^= 0x01
    manifest_path.write_bytes(bytes(data))
    assert _verify(tmp_path, root_ca).returncode != 0


def test_download_is_cached_per_pass_version(stack: Stack) -> None:
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        issued = client.post("/v1/passes", json={"template_id": make_template(client)["id"]})
        url = issued.json()["download_url"]
        first = client.get(url)
        etag, modified = first.headers["ETag"], first.headers["Last-Modified"]
        assert client.get(url, headers={"If-None-Match": etag}).status_code == 304
        assert client.get(url, headers={"If-Modified-Since": modified}).status_code == 304
        client.patch(f"/v1/passes/{issued.json()['id']}", json={"field_values": {"seat": "Z9"}})
        changed = client.get(url, headers={"If-None-Match": etag})
    assert changed.status_code == 200
    assert changed.headers["ETag"] != etag
    assert changed.content != first.content
