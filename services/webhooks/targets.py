"""Where a webhook may be sent: public addresses only, unless private networks are allowed.

A URL must be absolute http(s) with a host. Its host name is resolved and every address must be
public: loopback, private, link-local (169.254.169.254 included), carrier-grade NAT, multicast,
reserved, unspecified and their IPv6 equivalents (IPv4-mapped included) are refused. The sender
resolves again at every attempt and connects to the address it checked, so a name that starts
resolving to a private address after the webhook was created (DNS rebinding) is refused then.
"""

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolve = Callable[[str, int], Awaitable[list[IPAddress]]]
_CGNAT = ipaddress.ip_network("100.64.0.0/10")


class UnsafeTarget(ValueError):
    """The URL may not be sent to; the message says why."""


@dataclass(frozen=True)
class Target:
    scheme: str
    host: str
    port: int
    addresses: list[IPAddress]  # checked; the sender connects to one of these


def parse(url: str) -> tuple[str, str, int]:
    parts = urlsplit(url)
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise UnsafeTarget("must be an absolute http:// or https:// URL with a host")
    if parts.username is not None or parts.password is not None:
        raise UnsafeTarget("must not carry credentials; use the signature to authenticate")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:
        raise UnsafeTarget("has an invalid port") from exc
    return parts.scheme, parts.hostname, port


def is_public(address: IPAddress) -> bool:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return is_public(address.ipv4_mapped)
    if isinstance(address, ipaddress.IPv4Address) and address in _CGNAT:
        return False
    return address.is_global and not address.is_multicast


async def resolve(host: str, port: int) -> list[IPAddress]:
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise UnsafeTarget(f"host {host!r} does not resolve") from exc
    found: list[IPAddress] = []
    for info in infos:
        address = ipaddress.ip_address(info[4][0])
        if address not in found:
            found.append(address)
    return found


async def check_target(url: str, *, allow_private: bool, resolver: Resolve = resolve) -> Target:
    """The URL's checked addresses, or UnsafeTarget. `resolver` defaults to DNS (see
    services/webhooks/resolver.py for the operator's override file)."""
    scheme, host, port = parse(url)
    addresses = await resolver(host, port)
    if not allow_private:
        for address in addresses:
            if not is_public(address):
                raise UnsafeTarget(f"{host!r} resolves to {address}, which is not a public address")
    return Target(scheme=scheme, host=host, port=port, addresses=addresses)
