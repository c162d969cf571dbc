"""Where a webhook may be sent: public addresses only, unless private networks are allowed.

A URL must be absolute http(s) with a host, without control characters or whitespace (urlsplit
drops tab, CR and LF, so the checked URL and the one sent would differ). Its host name is resolved
and every address must be public: loopback, private, link-local (169.254.169.254 included),
carrier-grade NAT, multicast, reserved, unspecified and their IPv6 equivalents are refused. An
IPv6 address that carries an IPv4 address a translator or tunnel would reach is judged by that
IPv4 address (see `embedded_ipv4`). The sender resolves again at every attempt and connects to
the address it checked, so a name that starts resolving to a private address after the webhook
was created (DNS rebinding) is refused then.
"""

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

import idna

from shared.urls import url_characters_problem

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolve = Callable[[str, int], Awaitable[list[IPAddress]]]
_CGNAT = ipaddress.ip_network("100.64.0.0/10")
# IPv6 ranges whose last 32 bits are the IPv4 address a translator sends to: the NAT64
# well-known prefix (RFC 6052; DNS64 answers a public host's address in it on IPv6-only
# networks, which must keep working) and SIIT's IPv4-translated addresses (RFC 7915).
_LAST_32_BITS = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("::ffff:0:0:0/96"))
# Refused whatever they carry. 64:ff9b:1::/48 is local-use NAT64 (RFC 8215): the operator picks
# where in it the IPv4 address sits, so it cannot be read back. ::/96 is IPv4-compatible
# (deprecated by RFC 4291; no public host is reached through it, yet some stacks still tunnel
# it to the IPv4 address). 2001::/32 is Teredo, whose server and client addresses are relays.
_REFUSED_V6 = (
    ipaddress.ip_network("64:ff9b:1::/48"),
    ipaddress.ip_network("::/96"),
    ipaddress.ip_network("2001::/32"),
)


class UnsafeTarget(ValueError):
    """The URL may not be sent to; the message says why."""


@dataclass(frozen=True)
class Target:
    scheme: str
    host: str
    port: int
    addresses: list[IPAddress]  # checked; the sender connects to one of these


def parse(url: str) -> tuple[str, str, int]:
    # At every attempt: control characters, never sendable (an invisible one is refused when
    # the URL is saved: WebhookService._checked_url).
    if (problem := url_characters_problem(url, invisible=False)) is not None:
        raise UnsafeTarget(problem)
    parts = urlsplit(url)
    if parts.hostname and (problem := url_characters_problem(parts.hostname)) is not None:
        # In a host an invisible character is never sendable (the HTTP client refuses it).
        raise UnsafeTarget(f"has a host that {problem}")
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise UnsafeTarget("must be an absolute http:// or https:// URL with a host")
    if parts.username is not None or parts.password is not None:
        raise UnsafeTarget("must not carry credentials; use the signature to authenticate")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:
        raise UnsafeTarget("has an invalid port") from exc
    return parts.scheme, ascii_host(parts.hostname), port


def ascii_host(host: str) -> str:
    """`host` as DNS, TLS and the Host header name it: an international domain name in its
    xn-- form (sent as Unicode, the Host header failed to encode and every attempt failed)."""
    if host.isascii():
        return host
    try:
        return idna.encode(host, uts46=True).decode("ascii")
    except idna.IDNAError as exc:
        raise UnsafeTarget(f"has a host that is not a valid domain name ({exc})") from exc


def embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address that a packet to `address` ends up at through a translator or tunnel:
    IPv4-mapped (::ffff:0:0/96), 6to4 (2002::/16, bits 16 to 47), NAT64 well-known prefix and
    SIIT (last 32 bits). None when `address` carries none."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if any(address in network for network in _LAST_32_BITS):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def is_public(address: IPAddress) -> bool:
    if isinstance(address, ipaddress.IPv6Address):
        if any(address in network for network in _REFUSED_V6):
            return False
        if (embedded := embedded_ipv4(address)) is not None:
            # Python's is_global calls these prefixes global whatever they carry.
            return is_public(embedded)
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
