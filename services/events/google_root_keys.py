"""Google's root signing keys, which Google Wallet callbacks are verified against.

Two sources (docs/wallet-callbacks.md#root-signing-keys):

- `StaticRootKeys`: a file (TESSERA_EVENTS_GOOGLE_ROOT_KEYS_PATH), read once at start, for
  installs that cannot reach Google. Nothing refreshes it.
- `FetchedRootKeys`: Google's key list, fetched from TESSERA_EVENTS_GOOGLE_ROOT_KEYS_URL when a
  callback first needs it and then cached, as Tink's GooglePaymentsPublicKeysManager (the
  recipient Google's guide recommends) does: for the response's `Cache-Control: max-age` less
  its `Age`, each key only until its `keyExpiration` (verify_envelope skips expired keys). Unlike
  Tink, the list is also stale once its earliest key expires, so the key Google rotated in is
  fetched then; fetches are at least MIN_FRESHNESS apart whatever the headers say (anyone may
  post a callback, and none may make the service call Google on every request) and at most
  MAX_FRESHNESS; a failed fetch keeps the keys that are still valid and is tried again after
  RETRY_AFTER. Only when no valid key is at hand does a callback get 503, which Google retries.
"""

import asyncio
import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Final, Protocol

import httpx2

from services.events.google_verify import RootKey, load_root_keys

log = logging.getLogger(__name__)

MIN_FRESHNESS: Final = timedelta(minutes=1)
MAX_FRESHNESS: Final = timedelta(days=1)
RETRY_AFTER: Final = timedelta(seconds=30)
# Google's list holds a few keys, well under 2 KiB; a larger answer is not the key list.
MAX_DOCUMENT_BYTES: Final = 1024 * 1024


class RootKeysUnavailable(Exception):
    """No valid root key is at hand: none could be fetched, and none cached is unexpired."""


class RootKeySource(Protocol):
    async def keys(self, now: datetime) -> list[RootKey]:
        """Google's root keys to verify a callback with at `now`; `RootKeysUnavailable` if none."""
        ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True)
class StaticRootKeys:
    root_keys: list[RootKey]

    async def keys(self, now: datetime) -> list[RootKey]:
        # Once every key of the file expired, a callback is answered 503 (Google retries it
        # until the file is refreshed), not 401 as a bad signature (Google drops it).
        if not any(key.expires_at > now for key in self.root_keys):
            raise RootKeysUnavailable(
                "every key in TESSERA_EVENTS_GOOGLE_ROOT_KEYS_PATH has expired: put Google's "
                "current root signing keys there and restart the events service"
            )
        return self.root_keys

    async def aclose(self) -> None:
        return None


def static_root_keys(path: Path) -> StaticRootKeys:
    """The keys of a file; a file that is unreadable or holds no usable key raises ValueError
    naming the setting, which stops the service at start."""
    try:
        static = StaticRootKeys(load_root_keys(path.read_bytes()))
    except (OSError, ValueError) as exc:
        raise ValueError(f"TESSERA_EVENTS_GOOGLE_ROOT_KEYS_PATH: {exc}") from exc
    if not any(key.expires_at > datetime.now(UTC) for key in static.root_keys):
        log.error(
            "every key in TESSERA_EVENTS_GOOGLE_ROOT_KEYS_PATH (%s) has expired: Google Wallet "
            "callbacks are answered 503 until it holds Google's current keys",
            path,
        )
    return static


class FetchedRootKeys:
    def __init__(self, url: str, client: httpx2.AsyncClient) -> None:
        self.url = url
        self._client = client
        self._keys: list[RootKey] = []
        self._fresh_until: datetime | None = None  # None until the first fetch
        # One fetch at a time: callbacks that arrive while it runs wait for its keys.
        self._fetching = asyncio.Lock()

    async def keys(self, now: datetime) -> list[RootKey]:
        if self._stale(now):
            async with self._fetching:
                if self._stale(now):
                    await self._refresh(now)
        if not any(key.expires_at > now for key in self._keys):
            raise RootKeysUnavailable(f"no unexpired Google root signing key from {self.url}")
        return self._keys

    async def aclose(self) -> None:
        await self._client.aclose()

    def _stale(self, now: datetime) -> bool:
        return self._fresh_until is None or now >= self._fresh_until

    async def _refresh(self, now: datetime) -> None:
        try:
            keys, lifetime = await self._fetch(now)
        except (httpx2.HTTPError, ValueError) as exc:
            # The keys fetched before stay in use while they are valid.
            self._fresh_until = now + RETRY_AFTER
            log.warning(
                "could not fetch Google's root signing keys from %s (%s); next try in %ds",
                self.url,
                str(exc) or type(exc).__name__,
                RETRY_AFTER.total_seconds(),
            )
            return
        self._keys, self._fresh_until = keys, now + lifetime
        log.info(
            "fetched %d Google root signing key(s) from %s; next fetch in %ds",
            len(keys),
            self.url,
            lifetime.total_seconds(),
        )

    async def _fetch(self, now: datetime) -> tuple[list[RootKey], timedelta]:
        async with self._client.stream("GET", self.url) as response:
            if response.status_code != 200:
                raise ValueError(f"HTTP {response.status_code}")
            document = bytearray()
            async for chunk in response.aiter_bytes():
                document += chunk
                if len(document) > MAX_DOCUMENT_BYTES:
                    raise ValueError(f"the answer is over {MAX_DOCUMENT_BYTES} bytes")
        keys = load_root_keys(bytes(document))
        valid = [key for key in keys if key.expires_at > now]
        if not valid:
            raise ValueError("every key in the list has expired")
        first_expiry = min(key.expires_at for key in valid) - now
        return keys, lifetime(response.headers, first_expiry)


def lifetime(headers: httpx2.Headers, until_first_expiry: timedelta) -> timedelta:
    """How long a fetched key list is used: its HTTP freshness, up to the first expiry of one
    of its keys, within MIN_FRESHNESS and MAX_FRESHNESS."""
    return max(MIN_FRESHNESS, min(http_freshness(headers), until_first_expiry, MAX_FRESHNESS))


def http_freshness(headers: httpx2.Headers) -> timedelta:
    """`Cache-Control: max-age` less `Age`, as Tink reads them; none without a max-age, or with
    no-store or no-cache."""
    directives = {}
    for directive in headers.get("cache-control", "").split(","):
        name, _, value = directive.partition("=")
        directives[name.strip().lower()] = value.strip().strip('"')
    max_age = directives.get("max-age", "")
    if "no-store" in directives or "no-cache" in directives or not _seconds(max_age):
        return timedelta(0)
    age = headers.get("age", "").strip()
    remaining = int(max_age) - (int(age) if _seconds(age) else 0)
    return timedelta(seconds=min(max(remaining, 0), MAX_FRESHNESS.total_seconds()))


def _seconds(value: str) -> bool:
    # ASCII digits only (str.isdigit takes "²"); more than 12 (30,000 years) is not a time.
    return value.isascii() and value.isdigit() and len(value) <= 12


def root_key_source(path: Path | None, url: str, timeout_seconds: float) -> RootKeySource:
    """The file's keys when a path is set (the URL is then never used), else fetched ones."""
    if path is not None:
        return static_root_keys(path)
    client = httpx2.AsyncClient(timeout=timeout_seconds, follow_redirects=True, max_redirects=5)
    return FetchedRootKeys(url, client)
