"""MongoDB connection helper: one client per process, created in a lifespan, closed there."""

from typing import Any

from pymongo import AsyncMongoClient
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
