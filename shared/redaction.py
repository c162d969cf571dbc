"""Erasing a pass's personal data from the copies services keep of it (docs/privacy.md).

`POST /v1/passes/{id}/redact` erases the holder's name and email, the field values and the
metadata of a pass. Copies of the pass live on in what services keep: stored command results
(so a retried request answers what it answered), idempotency records, webhook delivery bodies,
scan records. `erase_pass_data` rewrites any such JSON-like value in place: every object that
is the pass (its `id` is the pass id, and it carries pass data) loses its personal data.
"""

import asyncio
import hashlib
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

log = logging.getLogger(__name__)

REDACTED_REASON = "redacted"
# What a copy of a pass may carry that is the holder's or about them, and what it becomes.
_ERASED: dict[str, Any] = {
    "holder_email": None,
    "holder_email_key": None,
    "holder_name": None,
    "field_values": {},
    "metadata": {},
    # A Google save link is a signed JWT that repeats the holder's name and the field values.
    "google_save_url": None,
    # The digest of the Google object made from them.
    "google_object_digest": None,
    # What the barcode shows, which a design may build from the field values (a member number).
    "barcode_message": None,
}


# The field of a stored command result or idempotency record (multikey-indexed) that lists
# what a redaction looks its copies up by: `copy_refs`.
REFS = "refs"


def code_ref(account_id: str, code: str) -> str:
    """The ref of a scan that read `code` without naming a pass: a digest, not the code."""
    return "code:" + hashlib.sha256(f"{account_id}\0{code}".encode()).hexdigest()


# Where a stored answer carries a pass or a webhook delivery (copy_refs).
_REF_PATHS = (
    ("id",),
    ("pass_id",),
    ("pass", "id"),
    ("data", "pass", "id"),
    ("rows", "record", "id"),
)


def copy_refs(body: Any, account_id: str | None) -> list[str]:
    """What a redaction finds a stored answer by (an index on REFS; a query on the paths
    themselves reads every stored answer): the ids at the paths where an answer carries a
    pass or a webhook delivery (`id`, `pass_id`, `pass.id`, `data.pass.id`, `rows.record.id`,
    through lists as MongoDB's dotted paths go), and `code_ref` of a scan that read a code
    without naming a pass."""
    if not isinstance(body, Mapping):
        return []
    refs = {ref for path in _REF_PATHS for ref in _values_at(body, path) if isinstance(ref, str)}
    code = body.get("code")
    if isinstance(code, str) and body.get("pass_id") is None and account_id is not None:
        refs.add(code_ref(account_id, code))
    return sorted(refs)


def copies_query(ids: Sequence[str], account_id: str | None, code: str | None) -> dict[str, Any]:
    """The query of the stored answers a redaction looks through: those whose REFS name one
    of `ids`, or the account's scans of `code` that named no pass (`code_ref`), and those
    stored before REFS existed (null in its index; none once the 48 hours they are kept are
    over). One predicate on the index: a store reads nothing else. The caller decides on
    each what it erases."""
    refs: list[str | None] = [*ids, None]
    if account_id is not None and code:
        refs.append(code_ref(account_id, code))
    return {REFS: {"$in": refs}}


def _values_at(value: Any, path: tuple[str, ...]) -> list[Any]:
    """The values at a dotted path, through the lists on the way (as a MongoDB query reads
    `data.pass.id` in each element of a list `data`)."""
    if isinstance(value, list):
        return [found for item in value for found in _values_at(item, path)]
    if not path:
        return [value]
    if not isinstance(value, Mapping) or path[0] not in value:
        return []
    return _values_at(value[path[0]], path[1:])


def erase_pass_data(value: Any, pass_id: str) -> bool:
    """Erase the pass's personal data wherever `value` holds a copy of the pass; whether
    anything changed."""
    changed = False
    if isinstance(value, dict):
        if value.get("id") == pass_id or value.get("_id") == pass_id:
            for key, erased in _ERASED.items():
                if key in value and value[key] != erased:
                    value[key] = {} if isinstance(erased, dict) else erased
                    changed = True
        for child in value.values():
            changed = erase_pass_data(child, pass_id) or changed
    elif isinstance(value, list):
        for child in value:
            changed = erase_pass_data(child, pass_id) or changed
    return changed


def is_redaction(event_type: str, metadata: dict[str, Any]) -> bool:
    """The `voided` event a redaction records."""
    return event_type == "voided" and metadata.get("reason") == REDACTED_REASON


# Events of a pass published before its redaction can still be recorded or fanned out just
# after it: consumers take batches in parallel, so an older batch may finish after a newer one.
# Each service therefore erases once when it sees the redaction and once more this much later.
SETTLE_SECONDS = 10.0


class ErasureAgain:
    """The second erasure of each redaction, run `SETTLE_SECONDS` later in the background. A
    process that stops first loses it; a repeated redaction erases again (docs/privacy.md)."""

    def __init__(self, delay: float = SETTLE_SECONDS):
        self._delay = delay
        self._pending: set[asyncio.Task[None]] = set()

    def schedule(self, erase: Callable[[], Awaitable[object]]) -> None:
        task = asyncio.create_task(self._later(erase))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _later(self, erase: Callable[[], Awaitable[object]]) -> None:
        await asyncio.sleep(self._delay)
        try:
            await erase()
        except Exception:  # the first erasure stands; a repeated redaction erases again
            log.exception("the second erasure of a redaction failed")
