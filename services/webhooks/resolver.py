"""Name resolution for webhook targets, with an operator's hosts-style override file.

TESSERA_WEBHOOK_RESOLVER_HOSTS_FILE names a file in /etc/hosts format (`<address> <name>...`,
`#` comments). A name listed there resolves to its listed addresses and DNS is not asked; any
other name goes to DNS. The file is read again at every lookup, so a change applies to the next
attempt without a restart. Operators use it to pin a webhook host to known addresses; the tests
use it to make a name start resolving elsewhere after a webhook was created (DNS rebinding).
The addresses are checked like DNS answers: an override cannot make a private address allowed.
"""

import ipaddress
import logging
from pathlib import Path

from services.webhooks.targets import IPAddress, Resolve, UnsafeTarget, resolve

log = logging.getLogger(__name__)


def read_hosts(text: str) -> dict[str, list[IPAddress]]:
    """Names (lower case) to addresses, in file order; malformed lines are skipped."""
    table: dict[str, list[IPAddress]] = {}
    for line in text.splitlines():
        fields = line.split("#", 1)[0].split()
        if len(fields) < 2:
            continue
        try:
            address = ipaddress.ip_address(fields[0])
        except ValueError:
            continue
        for name in fields[1:]:
            found = table.setdefault(name.lower().rstrip("."), [])
            if address not in found:
                found.append(address)
    return table


class HostsOverride:
    def __init__(self, path: Path | None):
        self._path = path

    def lookup(self, host: str) -> list[IPAddress] | None:
        if self._path is None:
            return None
        try:
            text = self._path.read_text()
        except OSError as exc:
            # An unreadable override must not fall back to DNS for the names it pins.
            log.error("cannot read the webhook resolver hosts file %s: %s", self._path, exc)
            raise UnsafeTarget(
                "cannot be resolved: the resolver override file is unreadable"
            ) from exc
        return read_hosts(text).get(host.lower().rstrip("."))

    async def resolve(self, host: str, port: int) -> list[IPAddress]:
        pinned = self.lookup(host)
        return pinned if pinned is not None else await resolve(host, port)


def resolver(path: Path | None) -> Resolve:
    """The resolver the webhook checks use: the override file first, then DNS."""
    return HostsOverride(path).resolve if path is not None else resolve
