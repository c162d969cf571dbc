"""The files every pass of a template version shares: its images and its strings files.

They depend only on the design and the apple_style, so the issuer computes them once per
process (cleaned images, strings files, the SHA-1 digests the manifest lists) and MongoDB
stores them once, in `template_assets` under `PassAssets.id`; a pass file keeps only what is
its own (pass.json, manifest.json, signature) and that id (docs/architecture.md).
"""

import hashlib
import json
from dataclasses import dataclass

from services.issuer.images import image_files
from services.issuer.localization import localization_files
from shared.bounded_cache import BoundedCache
from shared.design import Design

ASSETS_CACHE_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class PassAssets:
    """Shared files in .pkpass order (images, then strings files), and their digests.

    `id` is the SHA-256 of the names and contents, so equal files are stored once and an id
    always names the same bytes: a pass file signed over these digests stays valid.
    """

    id: str
    files: tuple[tuple[str, bytes], ...]
    sha1: dict[str, str]

    @classmethod
    def of(cls, files: dict[str, bytes]) -> "PassAssets":
        digest = hashlib.sha256()
        sha1: dict[str, str] = {}
        for name, data in files.items():
            # SHA-1 is what Apple's manifest format specifies.
            sha1[name] = hashlib.sha1(data, usedforsecurity=False).hexdigest()
            digest.update(hashlib.sha256(name.encode()).digest() + hashlib.sha256(data).digest())
        return cls(digest.hexdigest(), tuple(files.items()), sha1)

    @property
    def size(self) -> int:
        return sum(len(data) for _, data in self.files)


# By a digest of what they are built from: a hit skips base64 decoding, cleaning and hashing.
_BUILT: BoundedCache[bytes, PassAssets] = BoundedCache(ASSETS_CACHE_BYTES, lambda a: a.size)


def pass_assets(design: Design, apple_style: str) -> PassAssets:
    """The shared files of passes of `design` shown as `apple_style`, from the cache if built.

    Raises ValueError naming the file of an image that cannot be cleaned.
    """
    key = _source_digest(design, apple_style)
    found = _BUILT.get(key)
    if found is None:
        strings = localization_files(design.localizations, design.source_language)
        files = image_files(design, apple_style) | strings
        found = PassAssets.of(files)
        _BUILT.put(key, found)
    return found


def _source_digest(design: Design, apple_style: str) -> bytes:
    digest = hashlib.sha256(apple_style.encode())
    for name, image in design.images.given().items():
        for scale, encoded in image.scales().items():
            data = encoded.encode("utf-8", "surrogatepass")
            digest.update(f"|{name}@{scale}:{len(data)}|".encode())
            digest.update(data)
    # The strings files depend on the order of the strings as well: no sort_keys.
    digest.update(json.dumps([design.source_language, design.localizations]).encode())
    return digest.digest()
