"""Tests for pass.json rendering and .pkpass bundling, checked against the real openssl."""

import base64
import hashlib
import io
import json
import shutil
import struct
import subprocess
import zipfile
import zlib
from pathlib import Path
from typing import Any

import pytest

from services.issuer.pkpass import (
    APPLE_STYLES,
    PassContent,
    build_pkpass,
    default_icon_png,
    manifest_for,
    render_pass_json,
    sign_manifest,
)
from services.issuer.signing import SigningIdentity, ensure_dev_identity
from shared.design import Design

TOKEN = "a-very-long-authentication-token"


@pytest.fixture(scope="module")
def signing_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("signing")


@pytest.fixture(scope="module")
def identity(signing_dir: Path) -> SigningIdentity:
    return ensure_dev_identity(signing_dir)


def _design(**overrides: Any) -> Design:
    data: dict[str, Any] = {"organization_name": "Tessera", "description": "Test pass"}
    data.update(overrides)
    return Design.model_validate(data)


def _content(design: Design | None = None, **overrides: Any) -> PassContent:
    values: dict[str, Any] = {
        "apple_style": "generic",
        "design": design or _design(),
        "serial_number": "SER-1",
        "short_id": "abc123",
        "field_values": {},
        "holder_name": None,
        "authentication_token": TOKEN,
        "web_service_url": None,
        "voided": False,
    }
    values.update(overrides)
    return PassContent(**values)


def _png(width: int = 1) -> bytes:
    return default_icon_png(width)


def _openssl_verify(directory: Path, ca_file: Path) -> subprocess.CompletedProcess[bytes]:
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.fail("the openssl binary is required for these tests")
    command = [openssl, "cms", "-verify", "-binary", "-inform", "DER", "-in", "signature"]
    command += ["-content", "manifest.json", "-CAfile", str(ca_file), "-purpose", "any"]
    return subprocess.run(
        [*command, "-out", "/dev/null"], cwd=directory, capture_output=True, check=False
    )


def _manifest_matches(directory: Path) -> bool:
    manifest = json.loads((directory / "manifest.json").read_bytes())
    others = {p.name for p in directory.iterdir()} - {"manifest.json", "signature"}
    if set(manifest) != others:
        return False
    return all(
        hashlib.sha1((directory / name).read_bytes(), usedforsecurity=False).hexdigest() == digest
        for name, digest in manifest.items()
    )


def _flip_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("style", APPLE_STYLES)
def test_pkpass_verifies_and_tampering_is_detected(
    style: str, identity: SigningIdentity, signing_dir: Path, tmp_path: Path
) -> None:
    design = _design(
        fields=[{"key": "seat", "label": "Seat", "slot": "primary"}],
        barcode={"format": "qr"},
        transit_type="train" if style == "boardingPass" else None,
    )
    content = _content(design, apple_style=style, field_values={"seat": "12A"})
    archive = zipfile.ZipFile(io.BytesIO(build_pkpass(content, identity)))
    assert archive.namelist() == [
        "pass.json",
        "icon.png",
        "icon@2x.png",
        "manifest.json",
        "signature",
    ]
    assert all(info.compress_type == zipfile.ZIP_DEFLATED for info in archive.infolist())
    bundle = tmp_path / "bundle"
    archive.extractall(bundle)
    root_ca = signing_dir / "root-ca.pem"

    assert _manifest_matches(bundle)
    verified = _openssl_verify(bundle, root_ca)
    assert verified.returncode == 0, verified.stderr.decode()
    assert style in json.loads((bundle / "pass.json").read_bytes())

    original_pass = (bundle / "pass.json").read_bytes()
    _flip_byte(bundle / "pass.json")
    assert not _manifest_matches(bundle)
    (bundle / "pass.json").write_bytes(original_pass)

    original_manifest = (bundle / "manifest.json").read_bytes()
    _flip_byte(bundle / "manifest.json")
    tampered = _openssl_verify(bundle, root_ca)
    assert tampered.returncode != 0
    assert b"content verify error" in tampered.stderr
    (bundle / "manifest.json").write_bytes(original_manifest)

    other_pki = tmp_path / "other-pki"
    ensure_dev_identity(other_pki)
    untrusted = _openssl_verify(bundle, other_pki / "root-ca.pem")
    assert untrusted.returncode != 0
    assert b"unable to get local issuer certificate" in untrusted.stderr
    assert _openssl_verify(bundle, root_ca).returncode == 0  # restored bundle still good


def test_sign_manifest_is_detached_der(
    identity: SigningIdentity, signing_dir: Path, tmp_path: Path
) -> None:
    manifest = manifest_for({"pass.json": b"{}"})
    (tmp_path / "manifest.json").write_bytes(manifest)
    signature = sign_manifest(manifest, identity)
    (tmp_path / "signature").write_bytes(signature)

    assert signature[:1] == b"\x30"  # DER SEQUENCE, not PEM/S-MIME
    assert manifest not in signature  # detached: the content is not embedded
    assert _openssl_verify(tmp_path, signing_dir / "root-ca.pem").returncode == 0
    openssl = shutil.which("openssl")
    assert openssl is not None
    printed = subprocess.run(
        [openssl, "cms", "-cmsout", "-print", "-inform", "DER", "-in", "signature"],
        cwd=tmp_path,
        capture_output=True,
        check=True,
    ).stdout.decode()
    assert "signingTime" in printed
    assert "sha256" in printed
    assert "Tessera Dev WWDR-like Intermediate" in printed


def test_manifest_is_sorted_sha1_json() -> None:
    manifest = manifest_for({"b.png": b"bee", "a.json": b"ay"})

    ay = hashlib.sha1(b"ay", usedforsecurity=False).hexdigest()
    bee = hashlib.sha1(b"bee", usedforsecurity=False).hexdigest()
    assert manifest == f'{{"a.json":"{ay}","b.png":"{bee}"}}'.encode()
    with pytest.raises(ValueError, match="cannot list"):
        manifest_for({"signature": b""})


def test_pass_json_top_level(identity: SigningIdentity) -> None:
    design = _design(
        logo_text="Tessera Live",
        colors={"background": "#1a2B3c", "foreground": "#FFFFFF", "label": "#000000"},
    )
    content = _content(design, web_service_url="https://passes.example.com/apple")

    document = render_pass_json(content, identity)

    assert document["formatVersion"] == 1
    assert document["passTypeIdentifier"] == "pass.dev.tessera"
    assert document["teamIdentifier"] == "TESSERADEV"
    assert document["serialNumber"] == "SER-1"
    assert document["organizationName"] == "Tessera"
    assert document["description"] == "Test pass"
    assert document["logoText"] == "Tessera Live"
    assert document["backgroundColor"] == "rgb(26, 43, 60)"
    assert document["foregroundColor"] == "rgb(255, 255, 255)"
    assert document["labelColor"] == "rgb(0, 0, 0)"
    assert document["authenticationToken"] == TOKEN
    assert document["webServiceURL"] == "https://passes.example.com/apple"
    assert "voided" not in document
    assert "barcodes" not in document


def test_optional_keys_absent_by_default(identity: SigningIdentity) -> None:
    document = render_pass_json(_content(), identity)

    assert "logoText" not in document
    assert "webServiceURL" not in document
    assert "voided" not in document


def test_voided_flag(identity: SigningIdentity) -> None:
    assert render_pass_json(_content(voided=True), identity)["voided"] is True


def test_fields_value_default_and_omitted(identity: SigningIdentity) -> None:
    design = _design(
        fields=[
            {"key": "event", "label": "Event", "slot": "header", "default": "Gala"},
            {"key": "seat", "label": "Seat", "slot": "primary", "default": "GA"},
            {"key": "gate", "label": "Gate", "slot": "secondary"},
            {"key": "row", "label": "Row", "slot": "secondary", "default": "-"},
            {"key": "terms", "label": "Terms", "slot": "back", "default": "No refunds"},
        ]
    )
    content = _content(design, field_values={"seat": "12A", "row": "7", "unused": "x"})

    style = render_pass_json(content, identity)["generic"]

    assert style["headerFields"] == [{"key": "event", "label": "Event", "value": "Gala"}]
    assert style["primaryFields"] == [{"key": "seat", "label": "Seat", "value": "12A"}]
    assert style["secondaryFields"] == [{"key": "row", "label": "Row", "value": "7"}]
    assert style["auxiliaryFields"] == []
    assert style["backFields"] == [{"key": "terms", "label": "Terms", "value": "No refunds"}]


def test_holder_name_added_as_secondary_field(identity: SigningIdentity) -> None:
    design = _design(fields=[{"key": "tier", "label": "Tier", "slot": "secondary"}])
    content = _content(design, holder_name="Ada Lovelace", field_values={"tier": "Gold"})

    secondary = render_pass_json(content, identity)["generic"]["secondaryFields"]

    assert secondary[-1] == {"key": "holder_name", "label": "Name", "value": "Ada Lovelace"}


def test_holder_name_not_added_when_slot_full_or_key_taken(identity: SigningIdentity) -> None:
    full = _design(
        fields=[
            {"key": f"s{i}", "label": "S", "slot": "secondary", "default": "v"} for i in range(4)
        ]
    )
    taken = _design(fields=[{"key": "holder_name", "label": "Guest", "slot": "primary"}])

    full_style = render_pass_json(_content(full, holder_name="Ada"), identity)["generic"]
    taken_style = render_pass_json(
        _content(taken, holder_name="Ada", field_values={"holder_name": "A. L."}), identity
    )["generic"]

    assert [f["key"] for f in full_style["secondaryFields"]] == ["s0", "s1", "s2", "s3"]
    assert taken_style["secondaryFields"] == []
    assert taken_style["primaryFields"] == [
        {"key": "holder_name", "label": "Guest", "value": "A. L."}
    ]


@pytest.mark.parametrize(
    ("transit_type", "expected"),
    [
        ("air", "PKTransitTypeAir"),
        ("boat", "PKTransitTypeBoat"),
        ("bus", "PKTransitTypeBus"),
        ("generic", "PKTransitTypeGeneric"),
        ("train", "PKTransitTypeTrain"),
        (None, "PKTransitTypeGeneric"),
    ],
)
def test_boarding_pass_transit_type(
    identity: SigningIdentity, transit_type: str | None, expected: str
) -> None:
    content = _content(_design(transit_type=transit_type), apple_style="boardingPass")

    assert render_pass_json(content, identity)["boardingPass"]["transitType"] == expected


def test_transit_type_only_on_boarding_passes(identity: SigningIdentity) -> None:
    content = _content(_design(transit_type="air"), apple_style="eventTicket")

    assert "transitType" not in render_pass_json(content, identity)["eventTicket"]


@pytest.mark.parametrize(
    ("fmt", "expected"),
    [
        ("qr", "PKBarcodeFormatQR"),
        ("pdf417", "PKBarcodeFormatPDF417"),
        ("aztec", "PKBarcodeFormatAztec"),
        ("code128", "PKBarcodeFormatCode128"),
    ],
)
def test_barcode_format_and_message(identity: SigningIdentity, fmt: str, expected: str) -> None:
    barcode = {
        "format": fmt,
        "message": "T:{serial_number}/{short_id}/{field_values.seat}/{field_values.nope}/{other}",
        "alt_text": "Scan me",
    }
    content = _content(_design(barcode=barcode), field_values={"seat": "12A"})

    barcodes = render_pass_json(content, identity)["barcodes"]

    assert barcodes == [
        {
            "format": expected,
            "message": "T:SER-1/abc123/12A//{other}",
            "messageEncoding": "iso-8859-1",
            "altText": "Scan me",
        }
    ]


def test_barcode_without_alt_text(identity: SigningIdentity) -> None:
    barcode = render_pass_json(_content(_design(barcode={})), identity)["barcodes"][0]

    assert barcode["message"] == "SER-1"
    assert "altText" not in barcode


def test_design_images_are_bundled(identity: SigningIdentity) -> None:
    icon, logo = _png(3), _png(5)
    images = {"icon": base64.b64encode(icon).decode(), "logo": base64.b64encode(logo).decode()}
    archive = zipfile.ZipFile(io.BytesIO(build_pkpass(_content(_design(images=images)), identity)))

    assert archive.read("icon.png") == icon
    assert archive.read("icon@2x.png") == icon
    assert archive.read("logo.png") == logo
    manifest = json.loads(archive.read("manifest.json"))
    assert set(manifest) == {"pass.json", "icon.png", "icon@2x.png", "logo.png"}
    pass_json = archive.read("pass.json")
    assert json.loads(pass_json.decode("utf-8"))["serialNumber"] == "SER-1"
    compact = json.dumps(json.loads(pass_json), ensure_ascii=False, separators=(",", ":"))
    assert pass_json == compact.encode("utf-8")


@pytest.mark.parametrize("image", ["not base64!!", base64.b64encode(b"GIF89a....").decode()])
@pytest.mark.parametrize("slot", ["icon", "logo"])
def test_invalid_images_raise(identity: SigningIdentity, image: str, slot: str) -> None:
    content = _content(_design(images={slot: image}))

    with pytest.raises(ValueError, match=slot):
        build_pkpass(content, identity)


@pytest.mark.parametrize("size", [29, 58])
def test_default_icon_is_valid_png(size: int) -> None:
    data = default_icon_png(size)
    assert data.startswith(b"\x89PNG\r\n\x1a\n")

    chunks: dict[bytes, bytes] = {}
    offset = 8
    while offset < len(data):
        (length,) = struct.unpack(">I", data[offset : offset + 4])
        kind = data[offset + 4 : offset + 8]
        body = data[offset + 8 : offset + 8 + length]
        (crc,) = struct.unpack(">I", data[offset + 8 + length : offset + 12 + length])
        assert crc == zlib.crc32(kind + body) & 0xFFFFFFFF
        chunks[kind] = body
        offset += 12 + length

    width, height, depth, color_type = struct.unpack(">IIBB", chunks[b"IHDR"][:10])
    assert (width, height, depth, color_type) == (size, size, 8, 2)
    assert len(zlib.decompress(chunks[b"IDAT"])) == size * (1 + 3 * size)
    assert b"IEND" in chunks
    assert default_icon_png(size) is data  # cached, generated once


def test_invalid_content_is_rejected() -> None:
    with pytest.raises(ValueError, match="apple_style"):
        _content(apple_style="loyaltyCard")
    with pytest.raises(ValueError, match="authentication_token"):
        _content(authentication_token="short")
