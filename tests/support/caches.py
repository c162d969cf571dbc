"""Replicas of a coherent cache (shared/coherent_cache.py) for tests: each on a NATS connection
of its own, started, and holding its lease before the test uses it."""

import asyncio
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from typing import TypeVar

from faststream.nats import NatsBroker

from shared.coherent_cache import CoherentCache
from shared.nats import create_broker

C = TypeVar("C", bound=CoherentCache)  # type: ignore[type-arg]  # any cached value type

LEASE_DEADLINE_SECONDS = 10.0


async def started_caches(
    stack: AsyncExitStack, nats_url: str, count: int, make: Callable[[NatsBroker, int], C]
) -> list[C]:
    """`count` caches made by `make(broker, index)`, stopped (with their connections) when
    `stack` closes, returned once every one of them holds its lease."""
    caches = []
    for index in range(count):
        broker = create_broker(nats_url)
        await broker.connect()
        stack.push_async_callback(broker.stop)
        cache = make(broker, index)
        cache.start()
        stack.push_async_callback(cache.stop)
        caches.append(cache)
    deadline = time.monotonic() + LEASE_DEADLINE_SECONDS
    while not all(cache.usable() for cache in caches):
        assert time.monotonic() < deadline, "the caches' leases"
        await asyncio.sleep(0.02)
    return caches
