"""Google's root signing keys fetched from a key server on a real socket (the fake of
tests/support/fake_google_keys.py) and cached as Tink caches them: for the HTTP freshness, up
to the first key's expiry, then fetched again; failures keep the keys still valid."""

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import httpx2
import pytest

from services.events.google_root_keys import (
    MAX_DOCUMENT_BYTES,
    MAX_FRESHNESS,
    MIN_FRESHNESS,
    RETRY_AFTER,
    FetchedRootKeys,
    RootKeysUnavailable,
    http_freshness,
    lifetime,
)
from services.events.google_verify import RootKey
from tests.support.fake_google_keys import FakeGoogleKeys, running_fake_google_keys
from tests.support.google_signer import HOUR_MS, GoogleSigner

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
NOW_MS = int(NOW.timestamp() * 1000)
DAY_MS = 24 * HOUR_MS


@pytest.fixture(scope="module")
def server() -> Iterator[FakeGoogleKeys]:
    with running_fake_google_keys() as fake:
        yield fake


@pytest.fixture
def keys_server(server: FakeGoogleKeys) -> FakeGoogleKeys:
    server.serve({"keys": []})
    server.fetches = 0
    return server


def _fetched(server: FakeGoogleKeys) -> FetchedRootKeys:
    return FetchedRootKeys(server.url, httpx2.AsyncClient(timeout=5.0))


def _signs(key: RootKey, signer: GoogleSigner) -> bool:
    return key.public_key.public_numbers() == signer.root.public_key().public_numbers()


async def test_keys_are_fetched_once_and_kept_for_their_max_age(
    keys_server: FakeGoogleKeys,
) -> None:
    signer = GoogleSigner()
    keys_server.serve(signer.root_keys(NOW_MS + DAY_MS), {"Cache-Control": "public, max-age=3600"})
    source = _fetched(keys_server)
    try:
        (key,) = await source.keys(NOW)
        assert key.expires_at == NOW + timedelta(days=1)
        assert (await source.keys(NOW + timedelta(minutes=59)))[0] is key
        assert keys_server.fetches == 1
        # Past max-age the list is fetched again.
        await source.keys(NOW + timedelta(hours=1))
        assert keys_server.fetches == 2
    finally:
        await source.aclose()


async def test_keys_are_fetched_again_once_the_first_of_them_expires(
    keys_server: FakeGoogleKeys,
) -> None:
    """A long max-age does not keep an expired key: its replacement is fetched then."""
    old, new = GoogleSigner(), GoogleSigner()
    keys_server.serve(old.root_keys(NOW_MS + HOUR_MS), {"Cache-Control": "max-age=86400"})
    source = _fetched(keys_server)
    try:
        assert [k.expires_at for k in await source.keys(NOW)] == [NOW + timedelta(hours=1)]
        rotated = {
            "keys": [
                *old.root_keys(NOW_MS + HOUR_MS)["keys"],
                *new.root_keys(NOW_MS + DAY_MS)["keys"],
            ]
        }
        keys_server.serve(rotated, {"Cache-Control": "max-age=86400"})
        assert len(await source.keys(NOW + timedelta(minutes=59))) == 1
        later = await source.keys(NOW + timedelta(hours=1))
        assert keys_server.fetches == 2
        assert [_signs(key, new) for key in later] == [False, True]
    finally:
        await source.aclose()


async def test_a_failed_fetch_keeps_the_valid_keys_and_waits_before_trying_again(
    keys_server: FakeGoogleKeys,
) -> None:
    signer = GoogleSigner()
    keys_server.serve(signer.root_keys(NOW_MS + 3 * HOUR_MS), {"Cache-Control": "max-age=60"})
    source = _fetched(keys_server)
    try:
        first = await source.keys(NOW)
        keys_server.serve({}, status=503)
        stale = NOW + timedelta(minutes=5)
        assert await source.keys(stale) == first
        assert await source.keys(stale + RETRY_AFTER - timedelta(seconds=1)) == first
        assert keys_server.fetches == 2
        assert await source.keys(stale + RETRY_AFTER) == first
        assert keys_server.fetches == 3
        # Once the cached keys have expired too, nothing can be verified.
        with pytest.raises(RootKeysUnavailable):
            await source.keys(NOW + timedelta(hours=3))
    finally:
        await source.aclose()


@pytest.mark.parametrize(
    ("document", "status"),
    [
        ({"keys": []}, 200),
        ({"nothing": 1}, 200),
        ({"keys": [{"protocolVersion": "ECv2SigningOnly", "keyValue": "AAAA"}]}, 200),
        ("expired", 200),
        ({"keys": []}, 404),
        ("huge", 200),
    ],
    ids=["no keys", "not a key list", "no expiry", "all expired", "404", "over 1 MiB"],
)
async def test_without_a_usable_key_list_no_key_is_available(
    keys_server: FakeGoogleKeys, document: object, status: int
) -> None:
    signer = GoogleSigner()
    if document == "expired":
        document = signer.root_keys(NOW_MS)
    if document == "huge":
        document = signer.root_keys(NOW_MS + DAY_MS) | {"pad": "x" * MAX_DOCUMENT_BYTES}
    assert isinstance(document, dict)
    keys_server.serve(document, status=status)
    source = _fetched(keys_server)
    try:
        with pytest.raises(RootKeysUnavailable):
            await source.keys(NOW)
    finally:
        await source.aclose()


async def test_an_unreachable_server_makes_no_key_available() -> None:
    async with httpx2.AsyncClient(timeout=2.0) as client:
        source = FetchedRootKeys("http://127.0.0.1:9/keys", client)
        with pytest.raises(RootKeysUnavailable):
            await source.keys(NOW)


async def test_callbacks_arriving_together_wait_for_one_fetch(
    keys_server: FakeGoogleKeys,
) -> None:
    keys_server.serve(GoogleSigner().root_keys(NOW_MS + DAY_MS), {"Cache-Control": "max-age=600"})
    source = _fetched(keys_server)
    try:
        found = await asyncio.gather(*(source.keys(NOW) for _ in range(20)))
        assert all(keys == found[0] for keys in found)
        assert keys_server.fetches == 1
    finally:
        await source.aclose()


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"Cache-Control": "public, max-age=3600"}, 3600),
        ({"Cache-Control": 'max-age="120"', "Age": "20"}, 100),
        ({"Cache-Control": "max-age=60", "Age": "600"}, 0),
        ({"Cache-Control": "no-cache, max-age=600"}, 0),
        ({"Cache-Control": "no-store"}, 0),
        ({"Cache-Control": "max-age=²".encode("latin-1")}, 0),
        ({"Cache-Control": "max-age=" + "9" * 40}, 0),
        ({"Cache-Control": "max-age=999999999"}, MAX_FRESHNESS.total_seconds()),
        ({}, 0),
    ],
)
def test_http_freshness_is_max_age_less_age(
    headers: dict[str, str | bytes], seconds: float
) -> None:
    raw = [(k.encode(), v if isinstance(v, bytes) else v.encode()) for k, v in headers.items()]
    assert http_freshness(httpx2.Headers(raw)).total_seconds() == seconds


def test_the_lifetime_stays_between_the_bounds_and_before_the_first_expiry() -> None:
    long = httpx2.Headers({"Cache-Control": "max-age=7200"})
    assert lifetime(long, timedelta(days=9)) == timedelta(hours=2)
    assert lifetime(long, timedelta(minutes=10)) == timedelta(minutes=10)
    assert lifetime(long, timedelta(seconds=1)) == MIN_FRESHNESS
    assert lifetime(httpx2.Headers({}), timedelta(days=9)) == MIN_FRESHNESS
