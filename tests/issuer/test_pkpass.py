"""Tests for .pkpass bundling and signing, checked against the real openssl."""

import base64
import hashlib
import io
import json
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from services.issuer.bundle import pkpass_zip
from services.issuer.pkpass import (
    APPLE_STYLES,
    build_pkpass,
    default_icon_png,
    manifest_for,
    pass_assets,
    sign_manifest,
    sign_pass,
)
from shared.apple_identity import SigningIdentity, ensure_dev_identity
from shared.design import Design
from tests.issuer.pkpass_samples import (
    RICH_VARIANTS,
    all_scales,
    b64,
    content,
    minimal_design,
    pixels,
    png,
    sample,
)

SAMPLES = [*((style, "minimal") for style in APPLE_STYLES), *RICH_VARIANTS]


@pytest.fixture(scope="module")
def signing_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("signing")


@pytest.fixture(scope="module")
def identity(signing_dir: Path) -> SigningIdentity:
    return ensure_dev_identity(signing_dir)


def _openssl_verify(
    directory: Path, ca_file: Path, purpose: str | None = "any"
) -> subprocess.CompletedProcess[bytes]:
    """README's command ("Signing passes"); `purpose=None` leaves openssl's default."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.fail("the openssl binary is required for these tests")
    command = [openssl, "cms", "-verify", "-binary", "-inform", "DER", "-in", "signature"]
    command += ["-content", "manifest.json", "-CAfile", str(ca_file)]
    command += ["-purpose", purpose] if purpose else []
    return subprocess.run(
        [*command, "-out", "/dev/null"], cwd=directory, capture_output=True, check=False
    )


def _bundle_files(directory: Path) -> dict[str, Path]:
    """Every file under `directory` by its relative path, as the manifest names them."""
    return {
        path.relative_to(directory).as_posix(): path
        for path in directory.rglob("*")
        if path.is_file()
    }


def _manifest_matches(directory: Path) -> bool:
    try:
        manifest = json.loads((directory / "manifest.json").read_bytes())
    except ValueError:  # a flipped byte can break the JSON itself
        return False
    files = _bundle_files(directory)
    others = set(files) - {"manifest.json", "signature"}
    if set(manifest) != others:
        return False
    return all(
        hashlib.sha1(files[name].read_bytes(), usedforsecurity=False).hexdigest() == digest
        for name, digest in manifest.items()
    )


def _bundle_valid(directory: Path, ca_file: Path) -> bool:
    return _manifest_matches(directory) and _openssl_verify(directory, ca_file).returncode == 0


def _flip_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def _unzip(pkpass: bytes, directory: Path) -> zipfile.ZipFile:
    archive = zipfile.ZipFile(io.BytesIO(pkpass))
    archive.extractall(directory)
    return archive


@pytest.mark.parametrize(("style", "variant"), SAMPLES)
def test_every_file_is_signed_and_any_changed_byte_is_detected(
    style: str, variant: str, identity: SigningIdentity, signing_dir: Path, tmp_path: Path
) -> None:
    archive = _unzip(build_pkpass(sample(style, variant), identity), tmp_path)
    root_ca = signing_dir / "root-ca.pem"

    names = archive.namelist()
    assert names[0] == "pass.json"
    assert names[-2:] == ["manifest.json", "signature"]
    assert set(json.loads(archive.read("manifest.json"))) == set(names[:-2])
    # PNGs are stored as they are (compressed already), everything else is deflated.
    for info in archive.infolist():
        png = info.filename.endswith(".png")
        assert info.compress_type == (zipfile.ZIP_STORED if png else zipfile.ZIP_DEFLATED)
    assert style in json.loads(archive.read("pass.json"))
    verified = _openssl_verify(tmp_path, root_ca)
    assert verified.returncode == 0, verified.stderr.decode()
    assert _manifest_matches(tmp_path)

    for name, path in _bundle_files(tmp_path).items():
        original = path.read_bytes()
        _flip_byte(path)
        assert not _bundle_valid(tmp_path, root_ca), f"changing {name} went unnoticed"
        path.write_bytes(original)
    assert _bundle_valid(tmp_path, root_ca)


def test_tampered_manifest_fails_openssl_and_other_roots_are_untrusted(
    identity: SigningIdentity, signing_dir: Path, tmp_path: Path
) -> None:
    bundle = tmp_path / "bundle"
    _unzip(build_pkpass(sample("eventTicket", "rich"), identity), bundle)
    root_ca = signing_dir / "root-ca.pem"

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


def test_openssl_needs_purpose_any_as_for_passes_signed_by_apple(
    identity: SigningIdentity, signing_dir: Path, tmp_path: Path
) -> None:
    """openssl's default purpose for `cms -verify` is S/MIME signing, which an extended key
    usage without `emailProtection` fails; Apple's Pass Type ID certificates have TLS client
    and pass signing (1.2.840.113635.100.4.14) instead, and so has the development signer."""
    _unzip(build_pkpass(sample("eventTicket", "minimal"), identity), tmp_path)
    root_ca = signing_dir / "root-ca.pem"

    by_default = _openssl_verify(tmp_path, root_ca, purpose=None)
    assert by_default.returncode != 0
    assert b"unsuitable certificate purpose" in by_default.stderr
    documented = _openssl_verify(tmp_path, root_ca)
    assert documented.returncode == 0, documented.stderr.decode()


def test_rich_pass_files_in_order(identity: SigningIdentity) -> None:
    archive = zipfile.ZipFile(io.BytesIO(build_pkpass(sample("eventTicket", "rich"), identity)))

    assert archive.namelist() == [
        "pass.json",
        "icon.png",
        "icon@2x.png",
        "icon@3x.png",
        "logo.png",
        "logo@2x.png",
        "logo@3x.png",
        "strip.png",
        "strip@2x.png",
        "strip@3x.png",
        "en.lproj/pass.strings",
        "fr.lproj/pass.strings",
        "pt-BR.lproj/pass.strings",
        "manifest.json",
        "signature",
    ]
    manifest = json.loads(archive.read("manifest.json"))
    strings = archive.read("fr.lproj/pass.strings")
    assert manifest["fr.lproj/pass.strings"] == hashlib.sha1(strings).hexdigest()
    assert strings.startswith(b"\xff\xfe")  # UTF-16 little-endian byte order mark


def test_images_are_bundled_at_the_scales_given(identity: SigningIdentity) -> None:
    scales = all_scales("logo")
    icon = png(29, 29)
    design = Design.model_validate(
        {**minimal_design("generic"), "images": {"icon": b64(icon), "logo": scales}}
    )
    archive = zipfile.ZipFile(io.BytesIO(build_pkpass(content(design), identity)))

    # The cleaned images: the same pixels, and the bytes the design keeps.
    assert pixels(archive.read("icon.png")) == pixels(icon)
    assert "icon@2x.png" not in archive.namelist()  # only what the design gives
    assert design.images.logo is not None
    for scale, name in (("x1", "logo.png"), ("x2", "logo@2x.png"), ("x3", "logo@3x.png")):
        assert b64(archive.read(name)) == getattr(design.images.logo, scale)
        assert pixels(archive.read(name)) == pixels(base64.b64decode(scales[scale]))
    assert set(json.loads(archive.read("manifest.json"))) == {
        "pass.json",
        "icon.png",
        "logo.png",
        "logo@2x.png",
        "logo@3x.png",
    }
    pass_json = archive.read("pass.json")
    compact = json.dumps(json.loads(pass_json), ensure_ascii=False, separators=(",", ":"))
    assert pass_json == compact.encode("utf-8")


def test_default_icon_at_three_scales_without_a_design_icon(identity: SigningIdentity) -> None:
    archive = zipfile.ZipFile(io.BytesIO(build_pkpass(content(), identity)))

    assert archive.read("icon.png") == default_icon_png(29)
    assert archive.read("icon@2x.png") == default_icon_png(58)
    assert archive.read("icon@3x.png") == default_icon_png(87)


def test_images_the_style_does_not_show_are_left_out(identity: SigningIdentity) -> None:
    # Templates are refused for this when saved (Design.check_style); a stored design from
    # before that check still builds, without the image.
    design = Design.model_validate(
        {**minimal_design("generic"), "images": {"footer": all_scales("footer")}}
    )
    names = zipfile.ZipFile(io.BytesIO(build_pkpass(content(design), identity))).namelist()

    assert not [name for name in names if name.startswith("footer")]


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
    manifest = manifest_for({"b.png": b"bee", "fr.lproj/pass.strings": b"s", "a.json": b"ay"})

    ay = hashlib.sha1(b"ay", usedforsecurity=False).hexdigest()
    bee = hashlib.sha1(b"bee", usedforsecurity=False).hexdigest()
    strings = hashlib.sha1(b"s", usedforsecurity=False).hexdigest()
    expected = f'{{"a.json":"{ay}","b.png":"{bee}","fr.lproj/pass.strings":"{strings}"}}'
    assert manifest == expected.encode()
    with pytest.raises(ValueError, match="cannot list"):
        manifest_for({"signature": b""})


def test_invalid_content_is_rejected() -> None:
    with pytest.raises(ValueError, match="apple_style"):
        content(apple_style="loyaltyCard")
    with pytest.raises(ValueError, match="authentication_token"):
        content(authentication_token="short")
    with pytest.raises(ValueError, match="serial_number"):
        content(serial_number="")


def test_passes_of_one_design_share_assets_built_once(identity: SigningIdentity) -> None:
    design = Design.model_validate(
        {
            **minimal_design("generic"),
            "images": {"logo": all_scales("logo")},
            "localizations": {"fr": {"Seat": "Place"}},
        }
    )
    first = sign_pass(content(design, serial_number="A"), identity)
    second = sign_pass(content(design, serial_number="B"), identity)

    assert first.assets is second.assets  # built once, then from the cache
    assert first.pass_json != second.pass_json
    # A design loaded again from storage (another object, equal content) finds them too.
    assert (
        pass_assets(Design.from_stored(design.model_dump(mode="json")), "generic") is first.assets
    )
    assert [name for name, _ in first.assets.files] == [
        "icon.png",
        "icon@2x.png",
        "icon@3x.png",
        "logo.png",
        "logo@2x.png",
        "logo@3x.png",
        "en.lproj/pass.strings",  # the source language (services/issuer/localization.py)
        "fr.lproj/pass.strings",
    ]
    # The cached digests are the files' own: the manifest is what manifest_for computes.
    archive = zipfile.ZipFile(io.BytesIO(first.zip()))
    listed = {name: archive.read(name) for name in archive.namelist()[:-2]}
    assert archive.read("manifest.json") == manifest_for(listed) == first.manifest
    assert first.zip() == pkpass_zip(
        first.pass_json, first.assets.files, first.manifest, first.signature
    )
