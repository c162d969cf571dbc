"""services/api/accounts.py on the real store: an operator request retried under its
Idempotency-Key after a failed first run (it wrote, then failed before answering) makes one
account and one key per mode, not a second account with keys nobody saw."""

import pytest

from services.api.accounts import authenticate, create_account, create_key
from services.api.repository import ApiRepository
from shared.clock import SystemClock
from shared.errors import AuthenticationError
from shared.ids import new_id
from shared.mongo import Database


async def test_a_retried_account_creation_makes_one_account_and_replaces_its_unseen_keys(
    db: Database,
) -> None:
    repo = ApiRepository(db)
    await repo.ensure_indexes()
    command_id = new_id("command")
    first = await create_account(repo, SystemClock(), "Acme", "free", made_by=command_id)
    again = await create_account(repo, SystemClock(), "Acme", "free", made_by=command_id)
    assert again["id"] == first["id"]
    # Its keys sort as they were made (lists are newest first): the live key after the test key.
    keys = [doc async for doc in db["api_keys"].find({}).sort("_id", 1)]
    assert [doc["mode"] for doc in keys] == ["test", "live"]
    assert await db["accounts"].count_documents({}) == 1
    assert await db["api_keys"].count_documents({}) == 2
    # The first run's keys were never shown: only the retry's work.
    assert (await authenticate(repo, again["api_keys"]["test"])).account_id == first["id"]
    with pytest.raises(AuthenticationError):
        await authenticate(repo, first["api_keys"]["test"])
    # Another request is another account; a key request retried is one key.
    other = await create_account(repo, SystemClock(), "Acme", "free", made_by=new_id("command"))
    assert other["id"] != first["id"]
    key_command = new_id("command")
    for _ in range(2):
        await create_key(repo, SystemClock(), first["id"], "test", made_by=key_command)
    assert await db["api_keys"].count_documents({"account_id": first["id"]}) == 3
