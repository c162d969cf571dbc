"""MongoDB connection helper: one client per process, created in a lifespan, closed there."""

from typing import Any

from pymongo import AsyncMongoClient, WriteConcern
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.asynchronous.database import AsyncDatabase

Document = dict[str, Any]
MongoClient = AsyncMongoClient[Document]
Database = AsyncDatabase[Document]


def create_client(url: str) -> MongoClient:
    """A client whose writes are acknowledged only once they are in the store's journal
    (writeConcern j:true), so a crash of the store loses nothing that was acknowledged; a
    `journal=` option in the URL decides instead (docs/operations.md)."""
    options: dict[str, Any] = {"journal": True}
    if "journal=" in url.lower():
        options = {}
    # tz_aware so every datetime read back is UTC-aware, like the ones written.
    return AsyncMongoClient(url, tz_aware=True, uuidRepresentation="standard", **options)


def unjournaled(collection: AsyncCollection[Document]) -> AsyncCollection[Document]:
    """The collection with writes acknowledged before they reach the journal, when the client
    uses the default j:true (an operator's own write concern is left alone).

    Only for writes whose loss in a store crash costs nothing that was promised: rate-limit and
    quota counters, and idempotency records, which are always followed by a journaled commit of
    the command they guard (the store's log is sequential, so that commit makes them durable
    too) or guard a command that never committed."""
    if collection.write_concern.document != {"j": True}:
        return collection
    return collection.with_options(write_concern=WriteConcern())
