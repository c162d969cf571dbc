"""What Wallet devices report to POST /v1/log: errors they met talking to the web service.

Apple's endpoint is unauthenticated, so what it stores is bounded: at most `MAX_ENTRIES` per
request, each cut to `MAX_MESSAGE_CHARS`, at most `DEVICE_LOGS_PER_DAY` a day, each kept
`DEVICE_LOG_TTL` (repository.py). Operators read them at GET /admin/v1/device_logs.
"""

import logging

from services.events.repository import DeviceLogs
from shared.clock import Clock
from shared.json_input import UntrustedJsonError, loads_untrusted

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 64 * 1024
MAX_ENTRIES = 100
MAX_MESSAGE_CHARS = 2000


def parse_logs(body: bytes) -> list[str] | None:
    """The messages of a `{"logs": [...]}` body, or None when it is not one."""
    try:
        parsed = loads_untrusted(body)
    except UntrustedJsonError as exc:
        log.info("refused a device log body: %s", exc.reason)
        return None
    logs = parsed.get("logs") if isinstance(parsed, dict) else None
    if not isinstance(logs, list) or not all(isinstance(entry, str) for entry in logs):
        log.info("refused a device log body: not a list of strings under logs")
        return None
    return [entry[:MAX_MESSAGE_CHARS] for entry in logs[:MAX_ENTRIES]]


async def store_logs(logs: DeviceLogs, clock: Clock, body: bytes) -> int:
    """200 when the body is a log list (stored as far as the daily bound allows), else 400."""
    messages = parse_logs(body)
    if messages is None:
        return 400
    await logs.add(messages, clock.now())
    return 200
