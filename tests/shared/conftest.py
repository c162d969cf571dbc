"""A MongoDB client on the session's store, for the tests of shared/ that need one."""

from collections.abc import AsyncIterator

import pytest

from shared.mongo import MongoClient, create_client


@pytest.fixture
async def client(mongo_url: str) -> AsyncIterator[MongoClient]:
    mongo = create_client(mongo_url)
    try:
        yield mongo
    finally:
        await mongo.close()
