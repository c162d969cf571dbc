"""Render and sign Apple Wallet `.pkpass` bundles (the format: docs/templates.md).

Only pass.json, the manifest and the signature are a pass's own; images and strings files are
its template version's `assets`, built and hashed once per design, which is what keeps a build
cheap and lets the store hold them once.
"""

import hashlib
import json
from dataclasses import dataclass

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.serialization import pkcs7

from services.issuer.assets import PassAssets, pass_assets
from services.issuer.bundle import pkpass_zip
from services.issuer.content import (
    APPLE_STYLES,
    MIN_AUTH_TOKEN_LENGTH,
    MetadataDateError,
    MetadataDates,
    PassContent,
    metadata_dates,
)
from services.issuer.images import decode_png
from services.issuer.passjson import expand_barcode_message, render_pass_json
from shared.apple_identity import SigningIdentity
from shared.default_icon import default_icon_png
from shared.design_images import PNG_SIGNATURE

__all__ = [
    "APPLE_STYLES",
    "MIN_AUTH_TOKEN_LENGTH",
    "PNG_SIGNATURE",
    "MetadataDateError",
    "MetadataDates",
    "PassAssets",
    "PassContent",
    "SignedPass",
    "build_pkpass",
    "decode_png",
    "default_icon_png",
    "expand_barcode_message",
    "manifest_for",
    "metadata_dates",
    "pass_assets",
    "pass_files",
    "render_pass_json",
    "sign_manifest",
    "sign_pass",
]

_RESERVED_NAMES = frozenset({"manifest.json", "signature"})


@dataclass(frozen=True)
class SignedPass:
    """A signed pass in parts: the files that are its own, and the assets it shares."""

    pass_json: bytes
    assets: PassAssets
    manifest: bytes
    signature: bytes

    def zip(self) -> bytes:
        return pkpass_zip(self.pass_json, self.assets.files, self.manifest, self.signature)


def _pass_json_bytes(content: PassContent, identity: SigningIdentity) -> bytes:
    pass_json = render_pass_json(content, identity)
    return json.dumps(pass_json, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def pass_files(content: PassContent, identity: SigningIdentity) -> dict[str, bytes]:
    """Every file the manifest lists: pass.json, the images and the strings files, in order."""
    assets = pass_assets(content.design, content.apple_style)
    return {"pass.json": _pass_json_bytes(content, identity), **dict(assets.files)}


def sign_pass(
    content: PassContent, identity: SigningIdentity, assets: PassAssets | None = None
) -> SignedPass:
    """Render pass.json and sign the manifest; `assets` defaults to those of the design."""
    if assets is None:
        assets = pass_assets(content.design, content.apple_style)
    pass_json = _pass_json_bytes(content, identity)
    # The assets' digests were computed once, when they were built.
    digests = {"pass.json": hashlib.sha1(pass_json, usedforsecurity=False).hexdigest()}
    manifest = _manifest_json(digests | assets.sha1)
    return SignedPass(pass_json, assets, manifest, sign_manifest(manifest, identity))


def build_pkpass(content: PassContent, identity: SigningIdentity) -> bytes:
    """Render, sign and zip a complete .pkpass bundle."""
    return sign_pass(content, identity).zip()


def manifest_for(files: dict[str, bytes]) -> bytes:
    """Return manifest.json: a JSON object mapping each file path to its SHA-1 hex digest."""
    # SHA-1 is what Apple's manifest format specifies; the signature itself uses SHA-256.
    digests = {
        name: hashlib.sha1(data).hexdigest()  # noqa: S324  # Apple's format (above)
        for name, data in files.items()
    }
    return _manifest_json(digests)


def _manifest_json(digests: dict[str, str]) -> bytes:
    reserved = _RESERVED_NAMES.intersection(digests)
    if reserved:
        raise ValueError(f"the manifest cannot list {sorted(reserved)}")
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
