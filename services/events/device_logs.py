"""What Wallet devices report to POST /v1/log: errors they met talking to the web service.

Apple's endpoint is unauthenticated, so what it stores is bounded: at most `MAX_ENTRIES` per
request, each cut to `MAX_MESSAGE_CHARS`, at most `DEVICE_LOGS_PER_DAY` a day (and
`DEVICE_LOGS_PER_ADDRESS_PER_DAY` of them from one client address), each kept
`DEVICE_LOG_TTL` (repository.py). Operators read them at GET /admin/v1/device_logs.
"""

import logging
import re

from services.events.repository import DeviceLogs
from shared.clock import Clock
from shared.json_input import UntrustedJsonError, loads_untrusted

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 64 * 1024
MAX_ENTRIES = 100
MAX_MESSAGE_CHARS = 2000
# Wallet names the device in its messages ("Register task (for device 9f2c…, pass type …") and
# in the URLs it quotes (".../v1/devices/9f2c…/registrations/…"). The device library identifier
# alone authorizes the serial listing, so it is stored nowhere in clear: it is masked.
_DEVICE_IDS = re.compile(r"(?i)(for device |/devices/)[^\s,;)/?]+")
DEVICE_MASK = "[device]"


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
    return [_masked(entry)[:MAX_MESSAGE_CHARS] for entry in logs[:MAX_ENTRIES]]


def _masked(message: str) -> str:
    return _DEVICE_IDS.sub(lambda found: found.group(1) + DEVICE_MASK, message)


async def store_logs(logs: DeviceLogs, clock: Clock, body: bytes, address: str | None) -> int:
    """200 when the body is a log list (stored as far as the daily bounds allow: the day's, and
    the client address's share of it), else 400."""
    messages = parse_logs(body)
    if messages is None:
        return 400
    await logs.add(messages, clock.now(), address)
    return 200
