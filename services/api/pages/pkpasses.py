""".pkpasses: Apple's bundle of passes, a zip of up to 10 .pkpass files at its top level
(Apple's "Distributing and updating a pass", "Create a bundle of passes": at most 10 passes or
150 MB; Safari on iOS 15 and later offers to add them all at once).

The entries are stored, not deflated: a .pkpass is a zip already. They are named
`pass-<n>.pkpass` in the bundle's order, like passkit-generator's `PKPass.pack`, and carry a
fixed timestamp, so the same passes make the same bytes.
"""

import io
import logging
import zipfile
from collections.abc import Sequence

PKPASSES_TYPE = "application/vnd.apple.pkpasses"
MAX_PASSES = 10
MAX_BYTES = 150 * 1000 * 1000
# What zip adds around each entry (a local header of 30 bytes and a central directory entry
# of 46, each with the name, at most "pass-10.pkpass") and once at the end (22 bytes).
_ENTRY_OVERHEAD = 30 + 46 + 2 * len("pass-10.pkpass")
_END_OVERHEAD = 22
_ZIP_DATE_TIME = (1980, 1, 1, 0, 0, 0)

log = logging.getLogger(__name__)


def entry_name(position: int) -> str:
    """The name of the `position`-th pass (from 1) in the bundle."""
    return f"pass-{position}.pkpass"


def fitting(files: Sequence[bytes], max_bytes: int = MAX_BYTES) -> list[bytes]:
    """The longest prefix of `files` (at most MAX_PASSES) whose bundle stays within `max_bytes`.

    Within Tessera's limits ten passes stay far below Apple's 150 MB (a design crosses NATS,
    1 MiB by default); only a server configured for much larger messages could reach it, and
    then the passes past the limit are left out (each is still on the bundle's page) rather
    than making a bundle Wallet refuses whole.
    """
    kept: list[bytes] = []
    total = _END_OVERHEAD
    for data in files[:MAX_PASSES]:
        total += len(data) + _ENTRY_OVERHEAD
        if total > max_bytes:
            log.warning("a .pkpasses bundle left out %d passes over 150 MB", len(files) - len(kept))
            break
        kept.append(data)
    return kept


def pkpasses_zip(files: Sequence[bytes]) -> bytes:
    """The .pkpasses of these .pkpass files, in order (at most MAX_PASSES)."""
    if not 1 <= len(files) <= MAX_PASSES:
        raise ValueError(f"a .pkpasses holds 1 to {MAX_PASSES} passes, not {len(files)}")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as archive:
        for position, data in enumerate(files, start=1):
            info = zipfile.ZipInfo(entry_name(position), date_time=_ZIP_DATE_TIME)
            info.external_attr = 0o644 << 16
            archive.writestr(info, data)
    return buffer.getvalue()
