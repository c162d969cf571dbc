"""Render and sign Apple Wallet `.pkpass` bundles.

A .pkpass is a zip of pass.json, images, `<lang>.lproj/pass.strings` files, manifest.json
(SHA-1 of every other file) and `signature`, a detached DER PKCS#7 signature of manifest.json
made with the pass type certificate and carrying Apple's WWDR intermediate. pass.json is
rendered by `passjson`, images come from `images`, strings files from `localization`.
"""

import hashlib
import io
import json
import zipfile

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.serialization import pkcs7

from services.issuer.content import (
    APPLE_STYLES,
    MIN_AUTH_TOKEN_LENGTH,
    MetadataDateError,
    MetadataDates,
    PassContent,
    metadata_dates,
)
from services.issuer.images import decode_png, default_icon_png, image_files
from services.issuer.localization import localization_files
from services.issuer.passjson import expand_barcode_message, render_pass_json
from services.issuer.signing import SigningIdentity
from shared.design_images import PNG_SIGNATURE

__all__ = [
    "APPLE_STYLES",
    "MIN_AUTH_TOKEN_LENGTH",
    "PNG_SIGNATURE",
    "MetadataDateError",
    "MetadataDates",
    "PassContent",
    "build_pkpass",
    "decode_png",
    "default_icon_png",
    "expand_barcode_message",
    "manifest_for",
    "metadata_dates",
    "pass_files",
    "render_pass_json",
    "sign_manifest",
]

# A fixed timestamp keeps the zip bytes stable for identical content (only the signature's
# signing time varies between builds).
_ZIP_DATE_TIME = (1980, 1, 1, 0, 0, 0)
_RESERVED_NAMES = frozenset({"manifest.json", "signature"})


def pass_files(content: PassContent, identity: SigningIdentity) -> dict[str, bytes]:
    """Every file the manifest lists: pass.json, the images and the strings files, in order."""
    pass_json = json.dumps(
        render_pass_json(content, identity), ensure_ascii=False, separators=(",", ":")
    ).encode("utf-8")
    return {
        "pass.json": pass_json,
        **image_files(content.design, content.apple_style),
        **localization_files(content.design.localizations),
    }


def build_pkpass(content: PassContent, identity: SigningIdentity) -> bytes:
    """Render, sign and zip a complete .pkpass bundle."""
    files = pass_files(content, identity)
    manifest = manifest_for(files)
    files["manifest.json"] = manifest
    files["signature"] = sign_manifest(manifest, identity)

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        # dicts keep insertion order: pass.json, images, strings, manifest.json, signature.
        for name, data in files.items():
            info = zipfile.ZipInfo(name, date_time=_ZIP_DATE_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, data)
    return buffer.getvalue()


def manifest_for(files: dict[str, bytes]) -> bytes:
    """Return manifest.json: a JSON object mapping each file path to its SHA-1 hex digest."""
    reserved = _RESERVED_NAMES.intersection(files)
    if reserved:
        raise ValueError(f"the manifest cannot list {sorted(reserved)}")
    # SHA-1 is what Apple's manifest format specifies; the signature itself uses SHA-256.
    digests = {name: hashlib.sha1(data).hexdigest() for name, data in files.items()}  # noqa: S324
    return json.dumps(digests, sort_keys=True, separators=(",", ":")).encode("utf-8")


def sign_manifest(manifest: bytes, identity: SigningIdentity) -> bytes:
    """Return the detached DER PKCS#7 signature of `manifest` (the pkpass `signature` file)."""
    return (
        pkcs7.PKCS7SignatureBuilder()
        .set_data(manifest)
        .add_signer(identity.certificate, identity.private_key, hashes.SHA256())
        .add_certificate(identity.intermediate)
        .sign(
            serialization.Encoding.DER,
            [pkcs7.PKCS7Options.DetachedSignature, pkcs7.PKCS7Options.Binary],
        )
    )
