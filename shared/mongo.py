"""MongoDB connection helper: one client per process, created in a lifespan, closed there."""

from typing import Any

from pymongo import AsyncMongoClient
from pymongo.asynchronous.database import AsyncDatabase

Document = dict[str, Any]
MongoClient = AsyncMongoClient[Document]
Database = AsyncDatabase[Document]


def create_client(url: str) -> MongoClient:
    # tz_aware so every datetime read back is UTC-aware, like the ones written.
    return AsyncMongoClient(url, tz_aware=True, uuidRepresentation="standard")
