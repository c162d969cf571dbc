"""A fresh database and the webhooks repository for each test that needs MongoDB."""

import secrets
from collections.abc import AsyncIterator

import pytest

from services.webhooks.repository import WebhookRepository
from shared.mongo import create_client


@pytest.fixture
async def repo(mongo_url: str) -> AsyncIterator[WebhookRepository]:
    client = create_client(mongo_url)
    db = client[f"t_{secrets.token_hex(6)}"]
    repository = WebhookRepository(db)
    await repository.ensure_indexes()
    try:
        yield repository
    finally:
        await client.drop_database(db.name)
        await client.close()
