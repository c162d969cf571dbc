"""The principal cache (services/api/principals.py) on a real nats-server and store, with several
caches standing for api replicas: a key is read once and then answered from memory, and once
`invalidate` returns, no replica answers a revoked key or an old plan from its cache, even one
that stopped hearing NATS (it lost its lease first). The whole stack, over HTTP:
tests/e2e/test_round_trips.py."""

import asyncio
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AsyncExitStack
from typing import Any

import pytest
from faststream.nats import NatsBroker

from services.api.accounts import create_account, create_key, hash_key
from services.api.principals import PrincipalCache, tags_of
from services.api.repository import ApiRepository
from shared import coherent_cache
from shared.clock import SystemClock
from shared.errors import AuthenticationError, InternalError
from shared.mongo import Origin, count_commands, create_client
from shared.nats import create_broker
from tests.support.caches import started_caches
from tests.support.tcp_proxy import cutting_proxy

DEADLINE_SECONDS = 10.0


async def until(condition: Callable[[], bool], what: str) -> None:
    """Poll `condition` with a deadline (never a bare sleep as the wait itself)."""
    deadline = time.monotonic() + DEADLINE_SECONDS
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


@pytest.fixture(autouse=True)
def quick_leases(monkeypatch: pytest.MonkeyPatch) -> None:
    """The protocol's timings scaled down (a revoker waits up to a lease for replicas it has not
    heard yet, and every test starts new replicas); the rules are the same."""
    monkeypatch.setattr(coherent_cache, "HEARTBEAT_SECONDS", 0.2)
    monkeypatch.setattr(coherent_cache, "LEASE_SECONDS", 1.0)
    monkeypatch.setattr(coherent_cache, "ORDER_MARGIN_SECONDS", 0.2)


@pytest.fixture
async def repo(mongo_url: str) -> AsyncIterator[ApiRepository]:
    client = create_client(mongo_url)
    db = client[f"t_{secrets.token_hex(6)}"]
    repository = ApiRepository(db)
    await repository.ensure_indexes()
    try:
        yield repository
    finally:
        await client.drop_database(db.name)
        await client.close()


Replicas = Callable[[int], Awaitable[list[PrincipalCache]]]


@pytest.fixture
async def replicas(nats_url: str) -> AsyncIterator[Replicas]:
    """`replicas(n)`: n caches, each on a NATS connection of its own, holding their lease."""
    async with AsyncExitStack() as stack:

        async def make(count: int) -> list[PrincipalCache]:
            return await started_caches(
                stack, nats_url, count, lambda broker, n: PrincipalCache(broker, f"api-{n}")
            )

        yield make


async def _close(broker: NatsBroker) -> None:
    await broker.stop()


@pytest.fixture
def reads() -> Iterator[list[str]]:
    """The names of the MongoDB commands this process sends during the test."""
    sent: list[str] = []

    def count(command: str, origin: Origin) -> None:
        sent.append(command)

    count_commands(count)
    try:
        yield sent
    finally:
        count_commands(None)


async def _key(repo: ApiRepository) -> tuple[str, str, str]:
    """A new free account's (account id, test key, its key id)."""
    account = await create_account(repo, SystemClock(), "cached", "free")
    key = await create_key(repo, SystemClock(), account["id"], "test")
    return account["id"], key["key"], key["id"]


async def test_a_key_is_read_once_then_answered_from_memory(
    repo: ApiRepository, replicas: Replicas, reads: list[str]
) -> None:
    (cache,) = await replicas(1)
    _, key, key_id = await _key(repo)
    reads.clear()
    first = await cache.authenticate(repo, key)
    assert reads == ["find", "find"]  # the key, then its account's plan
    for _ in range(5):
        assert await cache.authenticate(repo, key) == first
    assert reads == ["find", "find"]
    assert first.key_id == key_id


async def test_every_replica_refuses_a_revoked_key_once_invalidate_returns(
    repo: ApiRepository, replicas: Replicas
) -> None:
    caches = await replicas(3)
    _, key, key_id = await _key(repo)
    for cache in caches:
        await cache.authenticate(repo, key)
        assert cache.get(hash_key(key)) is not None
    await repo.revoke_key(key_id, SystemClock().now())
    await caches[0].invalidate(key_id=key_id)
    for cache in caches:
        assert cache.get(hash_key(key)) is None
        with pytest.raises(AuthenticationError):
            await cache.authenticate(repo, key)


async def test_a_plan_change_reaches_every_replica(repo: ApiRepository, replicas: Replicas) -> None:
    caches = await replicas(2)
    account_id, key, _ = await _key(repo)
    for cache in caches:
        assert (await cache.authenticate(repo, key)).plan == "free"
    await repo.set_plan(account_id, "paid")
    await caches[1].invalidate(account_id=account_id)
    for cache in caches:
        assert (await cache.authenticate(repo, key)).plan == "paid"


async def test_a_replica_that_stopped_hearing_nats_has_lost_its_lease_when_revoke_returns(
    repo: ApiRepository, replicas: Replicas
) -> None:
    revoker, silent = await replicas(2)
    _, key, key_id = await _key(repo)
    await silent.authenticate(repo, key)
    # It hears nothing from now on: neither the invalidation nor its own heartbeats.
    subscription = silent._subscription
    assert subscription is not None
    await subscription.unsubscribe()
    await repo.revoke_key(key_id, SystemClock().now())
    await revoker.invalidate(key_id=key_id)
    assert not silent.usable()
    with pytest.raises(AuthenticationError):
        await silent.authenticate(repo, key)


async def test_a_revoker_that_just_reconnected_waits_for_replicas_it_did_not_hear(
    repo: ApiRepository, nats_url: str, replicas: Replicas
) -> None:
    """A revoker away from NATS for longer than a lease (a node of a cluster killed) heard no
    heartbeat meanwhile: right after it reconnected it still waits for every replica's answer
    or lease, as one that has just started does."""
    [other] = await replicas(1)
    host, port = nats_url.removeprefix("nats://").rsplit(":", 1)
    async with AsyncExitStack() as stack:
        proxy = await stack.enter_async_context(cutting_proxy(host, int(port)))
        [revoker] = await started_caches(
            stack,
            f"nats://127.0.0.1:{proxy.port}",
            1,
            lambda broker, n: PrincipalCache(broker, "api-revoker"),
        )
        _, key, key_id = await _key(repo)
        await other.authenticate(repo, key)
        connection = revoker._broker.connection
        proxy.refusing = True
        proxy.cut_next(b"heartbeat")
        await until(lambda: not connection.is_connected, "the revoker cut off")
        lease = coherent_cache.LEASE_SECONDS + coherent_cache.ORDER_MARGIN_SECONDS
        cut_at = time.monotonic()
        await until(lambda: time.monotonic() > cut_at + lease, "a lease away from NATS")
        proxy.refusing = False
        await until(lambda: connection.is_connected, "the revoker reconnected")
        # From here on `other` hears nothing, and answers no invalidation: only the end of
        # its lease may let the revocation return.
        subscription = other._subscription
        assert subscription is not None
        await subscription.unsubscribe()
        await repo.revoke_key(key_id, SystemClock().now())
        await revoker.invalidate(key_id=key_id)
        assert not other.usable()
        with pytest.raises(AuthenticationError):
            await other.authenticate(repo, key)


async def test_a_stopping_replica_answers_nothing_from_its_cache_once_it_says_goodbye(
    repo: ApiRepository, replicas: Replicas
) -> None:
    """The others stop waiting for a replica once they heard its goodbye."""
    leaving, _ = await replicas(2)
    _, key, _ = await _key(repo)
    await leaving.authenticate(repo, key)
    assert leaving.get(hash_key(key)) is not None
    connection = leaving._broker.connection
    publish = connection.publish
    cached_at_goodbye: list[bool] = []

    async def watched(subject: str, payload: bytes = b"", **kwargs: Any) -> None:
        if subject.endswith(".goodbye"):
            cached_at_goodbye.append(leaving.get(hash_key(key)) is not None)
        await publish(subject, payload, **kwargs)

    connection.publish = watched  # type: ignore[method-assign,assignment]
    await leaving.stop()
    assert cached_at_goodbye == [False]


async def test_a_read_that_raced_an_invalidation_is_not_kept(
    repo: ApiRepository, replicas: Replicas
) -> None:
    cache, other = await replicas(2)
    _, key, key_id = await _key(repo)
    principal = await other.authenticate(repo, key)
    began = cache.generation  # a read begins (before the revocation) ...
    await repo.revoke_key(key_id, SystemClock().now())
    await other.invalidate(key_id=key_id)
    cache.put(hash_key(key), principal, tags_of(principal), began)  # ... and ends after it
    assert cache.get(hash_key(key)) is None


async def test_without_nats_the_revocation_is_not_confirmed(
    repo: ApiRepository, nats_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(coherent_cache, "ECHO_TIMEOUT_SECONDS", 0.2)
    cache = PrincipalCache(create_broker(nats_url), "api-offline")  # never connected
    assert not cache.usable()
    with pytest.raises(InternalError) as raised:
        await cache.invalidate(key_id="api_key_x")
    assert raised.value.code == "service_unavailable"
    _, key, _ = await _key(repo)
    await cache.authenticate(repo, key)  # still answers, from the store every time
    assert cache.get(hash_key(key)) is None
