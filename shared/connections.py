"""Opening and closing the Mongo client and the NATS broker inside a lifespan, and running the
workers that need both (an outbox relay) while they are open."""

import asyncio
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Protocol

from faststream.nats import NatsBroker
from nats.errors import Error as NatsError

from shared.coherent_cache import CoherentCache
from shared.mongo import Database, MongoClient, create_client
from shared.nats import create_broker, ensure_streams
from shared.settings import ServiceSettings

log = logging.getLogger(__name__)


@dataclass
class Connections:
    mongo: MongoClient
    db: Database
    broker: NatsBroker
    stream_replicas: int = 1

    async def ping_mongo(self) -> None:
        await self.db.command("ping")

    async def ping_nats(self) -> None:
        if not await self.broker.ping(timeout=2.0):
            raise ConnectionError("NATS did not answer a ping")


def open_connections(settings: ServiceSettings) -> Connections:
    mongo = create_client(settings.mongodb_url)
    return Connections(
        mongo=mongo,
        db=mongo[settings.mongodb_database],
        broker=create_broker(settings.nats_url),
        stream_replicas=settings.events_stream_replicas,
    )


class Worker(Protocol):
    def start(self) -> None: ...

    async def stop(self) -> None: ...


MONGO_CLOSE_SECONDS = 3.0


@asynccontextmanager
async def running(connections: Connections, *workers: Worker) -> AsyncIterator[Connections]:
    """Start the broker (with the subscribers registered on it), then the workers; at the end
    stop the workers, while the broker still publishes what they finish, then close both.

    The workers stop together: each gives its work in flight a grace period (an outbox relay's
    batch, the issuer's job chunks, ...), and one after another those added up to more than a
    container's stop timeout. Coherent caches stop after them, as they did when the services
    listed them last: until the broker stops, its handlers still make changes whose
    invalidations need the cache's subscription. Each worker is stopped even if another's
    stop fails; the first failure is raised once all have stopped."""
    await connections.broker.connect()
    # Every service declares the streams before its consumers start, whatever the start order.
    await ensure_streams(connections.broker, connections.stream_replicas)
    await connections.broker.start()
    try:
        for worker in workers:
            worker.start()
        try:
            yield connections
        finally:
            caches = [worker for worker in workers if isinstance(worker, CoherentCache)]
            try:
                await _stop_all([worker for worker in workers if worker not in caches])
            finally:
                await _stop_all(caches)
    finally:
        try:
            await connections.broker.stop()
        except NatsError as exc:
            # NATS already gone (its own shutdown, or a crash): nothing is left to drain.
            log.warning("NATS connection not drained at shutdown: %s", exc)
        try:
            # The client ends its sessions on the server as it closes, waiting for one as long
            # as any operation (30 s): with the store down that held every service's stop.
            async with asyncio.timeout(MONGO_CLOSE_SECONDS):
                await connections.mongo.close()
        except TimeoutError:
            log.warning("MongoDB did not answer while its client closed; closed anyway")


async def _stop_all(workers: Sequence[Worker]) -> None:
    results = await asyncio.gather(*(worker.stop() for worker in workers), return_exceptions=True)
    failures = [result for result in results if isinstance(result, BaseException)]
    for failure in failures[1:]:
        log.error("another worker failed to stop too", exc_info=failure)
    if failures:
        raise failures[0]
