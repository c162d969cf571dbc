"""Acceptance: a downloaded .pkpass verifies with openssl against the development CA; its
images are cleaned and stored once per template version (issue 10, F13)."""

import base64
import hashlib
import io
import json
import shutil
import subprocess
import zipfile
import zlib
from pathlib import Path
from typing import Any

import bson
import httpx2
import pytest
from pymongo import MongoClient
from pymongo.synchronous.database import Database

from tests.issuer.pkpass_samples import (
    all_scales,
    b64,
    chunk_types,
    noisy_png,
    pixels,
    png,
    png_with,
)
from tests.support.api import TEMPLATE_BODY, create_template, ok
from tests.support.polling import poll
from tests.support.stack import Stack

pytestmark = pytest.mark.e2e
OPENSSL = shutil.which("openssl")
HTML = b"<html><script>alert(document.cookie)</script></html>"
PIXELS_ONLY = {b"IHDR", b"IDAT", b"IEND"}  # what a cleaned RGB PNG holds


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
        template = create_template(client, TEMPLATE_BODY)
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
        assert hashlib.sha1((tmp_path / name).read_bytes()).hexdigest() == digest
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
        assert hashlib.sha1(bytes(data)).hexdigest() != manifest[name]
    manifest_path = tmp_path / "manifest.json"
    data = bytearray(manifest_path.read_bytes())
    data[len(data) // 2] ^= 0x01
    manifest_path.write_bytes(bytes(data))
    assert _verify(tmp_path, root_ca).returncode != 0


def test_download_is_cached_per_pass_version(stack: Stack) -> None:
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        issued = client.post(
            "/v1/passes", json={"template_id": create_template(client, TEMPLATE_BODY)["id"]}
        )
        url = issued.json()["download_url"]
        first = client.get(url)
        etag = first.headers["ETag"]
        assert client.get(url, headers={"If-None-Match": etag}).status_code == 304

        def revalidated() -> bool:
            # Last-Modified is never later than Date (issue 15): while the stored stamp is
            # ahead of the clock it is the Date, which revalidates to a 200; then to a 304.
            modified = client.get(url).headers["Last-Modified"]
            return client.get(url, headers={"If-Modified-Since": modified}).status_code == 304

        poll(revalidated, timeout=5.0, message="a 304 for If-Modified-Since")
        # A date no calendar holds is no date: ignored (RFC 9110), the file served.
        odd = client.get(url, headers={"If-Modified-Since": "1 Jan 2020 00:99999999999999999999"})
        assert odd.status_code == 200
        client.patch(f"/v1/passes/{issued.json()['id']}", json={"field_values": {"seat": "Z9"}})
        changed = client.get(url, headers={"If-None-Match": etag})
    assert changed.status_code == 200
    assert changed.headers["ETag"] != etag
    assert changed.content != first.content


def _texty(data: bytes) -> bytes:
    """`data` with HTML in a tEXt chunk and a zTXt chunk that inflates to 20 MB."""
    bomb = zlib.compress(b"\0" * (20 * 1024 * 1024), 9)
    return png_with(data, (b"tEXt", b"Description\0" + HTML), (b"zTXt", b"Comment\0\0" + bomb))


def _with_images(images: dict[str, Any]) -> dict[str, Any]:
    return {"design": {**TEMPLATE_BODY["design"], "images": images}}


def _db(stack: Stack) -> tuple[MongoClient[dict[str, Any]], Database[dict[str, Any]]]:
    mongo: MongoClient[dict[str, Any]] = MongoClient(stack.mongo_url)
    return mongo, mongo[stack.database]


def _files(pkpass: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(pkpass)) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def test_passes_of_one_template_store_its_images_once(stack: Stack, tmp_path: Path) -> None:
    # Photo-like pixels do not compress: about 380 KB of PNG, in every pass as downloaded.
    images = {
        "icon": all_scales("icon"),
        "logo": {"x1": b64(png(160, 50)), "x3": b64(noisy_png(480, 150, seed=1))},
        "strip": b64(_texty(noisy_png(375, 144, seed=2))),
    }
    with stack.client(headers=stack.new_account().headers()) as client:
        template = create_template(client, TEMPLATE_BODY, **_with_images(images))
        issued = [
            client.post("/v1/passes", json={"template_id": template["id"]}).json() for _ in range(2)
        ]
        downloads = [httpx2.get(one["download_url"], timeout=30).content for one in issued]

    for download in downloads:
        files = _files(download)
        assert len(download) > 350_000
        assert pixels(files["strip.png"]) == pixels(noisy_png(375, 144, seed=2))
        assert set(chunk_types(files["strip.png"])) == PIXELS_ONLY
        assert HTML not in download
    folder = tmp_path / "bundle"
    zipfile.ZipFile(io.BytesIO(downloads[0])).extractall(folder)
    assert _verify(folder, stack.signing_dir / "root-ca.pem").returncode == 0

    mongo, db = _db(stack)
    with mongo:
        stored = [db["pass_files"].find_one({"_id": one["id"]}) for one in issued]
        assert all(doc is not None for doc in stored)
        sizes = [len(bson.encode(doc)) for doc in stored if doc is not None]
        [assets_id] = {doc["assets_id"] for doc in stored if doc is not None}
        assets = db["template_assets"].find_one({"_id": assets_id})
    assert max(sizes) < 8_000, sizes  # a few KB per pass: pass.json, manifest, signature
    assert assets is not None
    assert len(bson.encode(assets)) > 350_000


def test_the_public_logo_is_cleaned_sent_with_nosniff_and_kept_once_archived(
    stack: Stack,
) -> None:
    with stack.client(headers=stack.new_account().headers()) as client:
        logo = _texty(png(160, 50))
        template = create_template(client, TEMPLATE_BODY, **_with_images({"logo": b64(logo)}))
        url = f"/t/{template['id']}/logo.png"
        served = client.get(url)
        assert client.delete(f"/v1/templates/{template['id']}").status_code == 200
        archived = client.get(url)

    assert served.status_code == 200
    assert served.headers["content-type"] == "image/png"
    assert served.headers["x-content-type-options"] == "nosniff"
    assert served.headers["content-security-policy"] == "default-src 'none'"
    assert set(chunk_types(served.content)) == PIXELS_ONLY
    assert pixels(served.content) == pixels(png(160, 50))
    # Its passes remain valid: their pages and Google classes still show it.
    assert (archived.status_code, archived.content) == (200, served.content)


def test_a_template_stored_before_cleaning_issues_clean_passes(stack: Stack) -> None:
    # Written straight into MongoDB, as a template saved before images were cleaned.
    raw_icon = _texty(png(29, 29))
    raw_logo = _texty(png(160, 50))
    with stack.client(headers=stack.new_account().headers()) as client:
        template = create_template(client, TEMPLATE_BODY)
        broken = create_template(client, TEMPLATE_BODY)
        mongo, db = _db(stack)
        with mongo:
            raw = {"icon": b64(raw_icon), "logo": b64(raw_logo)}
            db["templates"].update_one({"_id": template["id"]}, {"$set": {"design.images": raw}})
            bad = {"logo": b64(png(30, 10)[:33] + png(8, 8)[33:])}  # too few pixels to decode
            db["templates"].update_one({"_id": broken["id"]}, {"$set": {"design.images": bad}})
        issued = client.post("/v1/passes", json={"template_id": template["id"]})
        refused = client.post("/v1/passes", json={"template_id": broken["id"]})
        logo = client.get(f"/t/{template['id']}/logo.png")
        no_logo = client.get(f"/t/{broken['id']}/logo.png")
    assert issued.status_code == 200, issued.text
    files = _files(httpx2.get(issued.json()["download_url"], timeout=30).content)
    for name, original in (("icon.png", png(29, 29)), ("logo.png", png(160, 50))):
        assert set(chunk_types(files[name])) == PIXELS_ONLY
        assert pixels(files[name]) == pixels(original)
    assert set(chunk_types(logo.content)) == PIXELS_ONLY
    assert base64.b64encode(logo.content).decode() != raw["logo"]

    # An image that cannot be cleaned is a clear 400 naming the template, never a 500.
    assert refused.status_code == 400, refused.text
    error = refused.json()["error"]
    assert error["code"] == "template_image_invalid"
    assert "image 'logo.png' could not be decoded as a PNG" in error["message"]
    assert no_logo.status_code == 404
    assert "Traceback" not in stack.log_text("issuer") + stack.log_text("api")


def test_an_image_that_does_not_decode_is_refused_with_its_param(stack: Stack) -> None:
    broken = png(30, 10)[:33] + png(8, 8)[33:]  # the IHDR promises more pixels than IDAT holds
    with stack.client(headers=stack.new_account().headers()) as client:
        refused = client.post(
            "/v1/templates",
            json={
                **TEMPLATE_BODY,
                **_with_images({"logo": {"x1": b64(png(5, 5)), "x2": b64(broken)}}),
            },
        )
    assert refused.status_code == 400, refused.text
    error = refused.json()["error"]
    assert error["param"] == "design.images.logo.x2"
    assert "image 'logo@2x' could not be decoded as a PNG" in error["message"]


def test_a_pass_of_a_template_whose_image_cannot_be_cleaned_is_still_voided_and_redacted(
    stack: Stack,
) -> None:
    """A void or a redaction must happen whatever the template's images: they answered 400
    template_image_invalid, the pass stayed live and the holder's data unerased. The new file
    goes without the design's images (the generated icon alone)."""
    with stack.client(headers=stack.new_account().headers()) as client:
        template = create_template(client, TEMPLATE_BODY)
        voided = ok(client.post("/v1/passes", json={"template_id": template["id"]}))
        redacted = ok(
            client.post(
                "/v1/passes", json={"template_id": template["id"], "holder_name": "Ada Lovelace"}
            )
        )
        mongo, db = _db(stack)
        with mongo:
            bad = {"logo": b64(png(30, 10)[:33] + png(8, 8)[33:])}  # too few pixels to decode
            db["templates"].update_one({"_id": template["id"]}, {"$set": {"design.images": bad}})
        gone = ok(client.delete(f"/v1/passes/{voided['id']}"))
        erased = ok(client.post(f"/v1/passes/{redacted['id']}/redact"))
    assert gone["voided"] is True
    assert (erased["voided"], erased["holder_name"]) == (True, None)
    files = _files(httpx2.get(voided["download_url"], timeout=30).content)
    assert json.loads(files["pass.json"])["voided"] is True
    assert "logo.png" not in files
    assert "icon.png" in files
