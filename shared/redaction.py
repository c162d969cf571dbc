"""Erasing a pass's personal data from the copies services keep of it (docs/privacy.md).

`POST /v1/passes/{id}/redact` erases the holder's name and email, the field values and the
metadata of a pass. Copies of the pass live on in what services keep: stored command results
(so a retried request answers what it answered), idempotency records, webhook delivery bodies,
scan records. `erase_pass_data` rewrites any such JSON-like value in place: every object that
is the pass (its `id` is the pass id, and it carries pass data) loses its personal data.
"""

import asyncio
import logging
from collections.abc import Awaitable, Callable
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
