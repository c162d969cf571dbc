"""One HTTP attempt to a webhook URL, pinned to an address checked at this very attempt.

The URL's host is resolved and checked (services/webhooks/targets.py) before every attempt; the
request then goes to one of the checked addresses, with the real host in the Host header and,
for https, as the TLS server name (SNI and certificate check). A name that starts resolving to
a private address after the webhook was created is refused, and nothing is sent.

Redirects are never followed; the attempt, headers to the last body byte read, must finish in
TESSERA_WEBHOOK_TIMEOUT_SECONDS. Proxy variables of the environment are ignored: the sender
connects to the address it checked, nothing else.

Connections are kept alive and pooled per endpoint: http ones in one pool keyed by address and
port; https ones in a pool per host name (at most `TLS_POOLS` hosts, the least recently used
closed first), because a pool is keyed by address and a connection made (SNI and certificate
check) for one host name must never carry a request for another host name that shares it.
"""

import asyncio
import logging
import ssl
from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

import httpx2

from services.webhooks.targets import Resolve, Target, UnsafeTarget, check_target, resolve

log = logging.getLogger(__name__)

USER_AGENT = "svc-webhooks/1.0"
RESPONSE_BODY_CHARS = 2000
# A UTF-8 character is at most 4 bytes: enough bytes for RESPONSE_BODY_CHARS characters.
_READ_BYTES = RESPONSE_BODY_CHARS * 4
# https hosts with a pool of their own at once; more are served, the least recently used
# host's pool being closed.
TLS_POOLS = 64
# Answers whose Retry-After holds the endpoint back (docs/webhooks.md#throttling-and-retry-after).
RETRY_AFTER_STATUSES = frozenset({429, 503})


@dataclass(frozen=True)
class Outcome:
    """What an attempt produced: `response_status` None when no response was received."""

    ok: bool
    response_status: int | None
    response_body: str | None
    # Seconds a 429 or 503 asked for with Retry-After, if it did.
    retry_after: float | None = None


def _host_header(target: Target) -> str:
    host = f"[{target.host}]" if ":" in target.host else target.host
    default = 443 if target.scheme == "https" else 80
    return host if target.port == default else f"{host}:{target.port}"


def _truncated(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")[:RESPONSE_BODY_CHARS]


class Sender:
    def __init__(
        self,
        *,
        timeout_seconds: float,
        allow_private: bool,
        max_connections: int,
        resolver: Resolve = resolve,
        trust: ssl.SSLContext | None = None,
    ):
        """`trust`: the certificates https endpoints are checked against (default: the
        system's and certifi's, as httpx2 does; tests pass a context trusting their own CA)."""
        self._timeout = timeout_seconds
        self._allow_private = allow_private
        self._resolver = resolver
        self._trust: ssl.SSLContext | bool = trust if trust is not None else True
        self._limits = httpx2.Limits(max_connections=max_connections)
        self._plain = _client(timeout_seconds, self._limits)
        self._tls: OrderedDict[str, httpx2.AsyncClient] = OrderedDict()

    async def aclose(self) -> None:
        await self._plain.aclose()
        for client in self._tls.values():
            await client.aclose()
        self._tls.clear()

    def _tls_client(self, host: str) -> httpx2.AsyncClient:
        """The host's own pool (see the module's docstring)."""
        client = self._tls.get(host)
        if client is None:
            client = self._tls[host] = _client(self._timeout, self._limits, self._trust)
            if len(self._tls) > TLS_POOLS:
                _, oldest = self._tls.popitem(last=False)
                # Requests in flight on it finish; it is closed in the background.
                asyncio.get_running_loop().create_task(oldest.aclose())
        self._tls.move_to_end(host)
        return client

    async def send(self, url: str, body: str, headers: dict[str, str]) -> Outcome:
        try:
            target = await check_target(
                url, allow_private=self._allow_private, resolver=self._resolver
            )
        except UnsafeTarget as exc:
            return Outcome(False, None, f"refused, nothing was sent: the url {exc}")
        status: int | None = None
        retry_after: float | None = None
        read = bytearray()
        try:
            async with asyncio.timeout(self._timeout):
                async with self._open(target, url, body, headers) as response:
                    status = response.status_code
                    if status in RETRY_AFTER_STATUSES:
                        retry_after = retry_after_seconds(response.headers.get("retry-after"))
                    async for chunk in response.aiter_bytes():
                        read.extend(chunk)
                        if len(read) >= _READ_BYTES:
                            break
        except (TimeoutError, httpx2.TimeoutException):
            if status is None:
                return Outcome(False, None, f"no response within {self._timeout:g} s")
            # The status came, the body did not: a 2xx that never finished is no success.
            late = f"the response body did not arrive within {self._timeout:g} s"
            return Outcome(False, status, late, retry_after)
        except httpx2.HTTPError as exc:
            if status is None:
                return Outcome(False, None, _failure(exc))
            return Outcome(False, status, _cut_short(exc), retry_after)
        except Exception as exc:
            log.exception("webhook attempt to %s failed unexpectedly", target.host)
            if status is None:
                return Outcome(False, None, _failure(exc))
            return Outcome(False, status, _cut_short(exc), retry_after)
        return Outcome(200 <= status < 300, status, _truncated(bytes(read)), retry_after)

    @asynccontextmanager
    async def _open(
        self, target: Target, url: str, body: str, headers: dict[str, str]
    ) -> AsyncIterator[httpx2.Response]:
        """The response of the first checked address that accepts a connection."""
        client = self._tls_client(target.host) if target.scheme == "https" else self._plain
        extensions = {"sni_hostname": target.host} if target.scheme == "https" else {}
        sent_headers = {
            **headers,
            "Host": _host_header(target),
            "Content-Type": "application/json",
            "User-Agent": USER_AGENT,
        }
        refused: httpx2.ConnectError | None = None
        for address in target.addresses:
            request = client.build_request(
                "POST",
                httpx2.URL(url).copy_with(host=str(address)),
                content=body.encode(),
                headers=sent_headers,
                extensions=extensions,
            )
            try:
                response = await client.send(request, stream=True)
            except httpx2.ConnectError as exc:
                refused = exc  # nothing was sent to this address; try the next one
                continue
            try:
                yield response
            finally:
                await response.aclose()
            return
        raise refused or httpx2.ConnectError(f"{target.host} has no address")


def _client(
    timeout_seconds: float, limits: httpx2.Limits, verify: ssl.SSLContext | bool = True
) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(
        timeout=timeout_seconds,
        limits=limits,
        follow_redirects=False,
        trust_env=False,
        verify=verify,
    )


def retry_after_seconds(value: str | None, now: datetime | None = None) -> float | None:
    """A Retry-After header's wait in seconds (delay-seconds or an HTTP-date; RFC 9110
    10.2.3), or None when it is absent or malformed. Never negative."""
    if value is None:
        return None
    value = value.strip()
    # ASCII only: str.isdigit() also takes "²", which float() refuses (RFC 9110: DIGIT). The
    # header sent twice arrives joined ("120, 60"): the longer wait is kept.
    waits = [part.strip() for part in value.split(",")]
    if all(wait.isascii() and wait.isdigit() for wait in waits):
        return max(float(wait) for wait in waits)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        if "," in value:  # IMF-fixdate and RFC 850 dates name GMT: without it, malformed
            return None
        # asctime's form ("Sun Nov  6 08:49:37 1994") names no zone: every HTTP-date is GMT
        # (RFC 9110, 5.6.7), which a recipient must accept in all three forms.
        when = when.replace(tzinfo=UTC)
    return max((when - (now or datetime.now(UTC))).total_seconds(), 0.0)


def _cut_short(exc: BaseException) -> str:
    return f"the response body was cut short: {type(exc).__name__}: {exc}"[:RESPONSE_BODY_CHARS]


def _failure(exc: BaseException) -> str:
    return f"request failed: {type(exc).__name__}: {exc}"[:RESPONSE_BODY_CHARS]
