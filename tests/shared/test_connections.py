"""`running`: the workers a service runs with its connections stop together, coherent caches
after them, and all of them stop even when one's stop fails; then the real broker stops and
the real client closes."""

import asyncio
from pathlib import Path
from typing import Any, cast

import pytest
from pymongo.errors import InvalidOperation

from shared import connections
from shared.coherent_cache import CoherentCache
from shared.connections import Connections, running
from shared.mongo import create_client
from shared.nats import create_broker
from tests.support.servers import embedded_mongo


class _Stops:
    """The workers' stops begun so far, and an event once all `count` of them have."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.begun = 0
        self.all_begun = asyncio.Event()


class _Worker:
    """Its stop takes until every worker's stop has begun: stopped one after another, the
    first never ends (and the test's wait for it times out)."""

    def __init__(self, stops: _Stops, fails: bool = False) -> None:
        self._stops = stops
        self._fails = fails
        self.stopped = False

    def start(self) -> None:
        pass

    async def stop(self) -> None:
        self._stops.begun += 1
        if self._stops.begun == self._stops.count:
            self._stops.all_begun.set()
        await asyncio.wait_for(self._stops.all_begun.wait(), 2)
        if self._fails:
            raise RuntimeError("stop failed")
        self.stopped = True


@pytest.fixture
def conn(nats_url: str, mongo_url: str) -> Connections:
    mongo = create_client(mongo_url)
    return Connections(mongo=mongo, db=mongo["connections_test"], broker=create_broker(nats_url))


async def _closed(conn: Connections) -> bool:
    """Whether the broker is stopped and the client closed (a closed client refuses work)."""
    try:
        await conn.ping_mongo()
    except InvalidOperation:
        return conn.broker._connection is None
    return False


async def test_the_workers_stop_together_then_the_connections_close(conn: Connections) -> None:
    """Each worker's grace period (an outbox relay's 5 s, the issuer's job chunks' 10 s, ...)
    ran after the previous one's, past a container's stop timeout."""
    stops = _Stops(3)
    workers = [_Worker(stops) for _ in range(3)]
    async with running(conn, *workers):
        pass
    assert all(worker.stopped for worker in workers)
    assert await _closed(conn)


async def test_a_failing_stop_leaves_no_other_worker_running(conn: Connections) -> None:
    stops = _Stops(2)
    failing, other = _Worker(stops, fails=True), _Worker(stops)
    with pytest.raises(RuntimeError, match="stop failed"):
        async with running(conn, failing, other):
            pass
    assert other.stopped
    assert await _closed(conn)


class _Cache(CoherentCache[str]):
    def __init__(self, stopped: list[str]) -> None:
        super().__init__(cast(Any, None), "tests.cache", "test", name="test cache")
        self._stopped = stopped

    def start(self) -> None:
        pass

    async def stop(self) -> None:
        self._stopped.append("cache")


class _SlowWorker:
    def __init__(self, stopped: list[str]) -> None:
        self._stopped = stopped

    def start(self) -> None:
        pass

    async def stop(self) -> None:
        await asyncio.sleep(0.05)  # work in flight finishing
        self._stopped.append("worker")


async def test_a_coherent_cache_stops_after_the_other_workers(conn: Connections) -> None:
    """Until the broker stops, its handlers still change what a cache holds (a template
    PATCH), and their invalidations need the cache's subscription: stopped with the others,
    such a change answered service_unavailable for as long as the others took to stop."""
    stopped: list[str] = []
    async with running(conn, _Cache(stopped), _SlowWorker(stopped)):
        pass
    assert stopped == ["worker", "cache"]


async def test_a_service_stops_at_once_when_the_store_is_gone(
    nats_url: str, tmp_path: Path
) -> None:
    """The MongoDB client ends its sessions as it closes and waited up to 30 s for a store that
    is gone (killed, or down with its host): every service's stop waited with it."""
    with embedded_mongo(tmp_path) as url:
        mongo = create_client(url)
        await mongo["connections_test"].command("ping")  # a session in the pool, to end
        conn = Connections(
            mongo=mongo, db=mongo["connections_test"], broker=create_broker(nats_url)
        )
        stack = running(conn)
        await stack.__aenter__()
    # The store is gone now.
    async with asyncio.timeout(connections.MONGO_CLOSE_SECONDS + 5):
        await stack.__aexit__(None, None, None)
