"""Opening and closing the Mongo client and the NATS broker inside a lifespan, and running the
workers that need both (an outbox relay) while they are open."""

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Protocol

from faststream.nats import NatsBroker
from nats.errors import Error as NatsError

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


@asynccontextmanager
async def running(connections: Connections, *workers: Worker) -> AsyncIterator[Connections]:
    """Start the broker (with the subscribers registered on it), then the workers; at the end
    stop the workers, while the broker still publishes what they finish, then close both."""
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
            for worker in workers:
                await worker.stop()
    finally:
        try:
            await connections.broker.stop()
        except NatsError as exc:
            # NATS already gone (its own shutdown, or a crash): nothing is left to drain.
            log.warning("NATS connection not drained at shutdown: %s", exc)
        await connections.mongo.close()
