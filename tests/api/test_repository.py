"""The api's store at start: an index a release retired is dropped (each index costs every
write of its collection), and a start without it is fine."""

import secrets

from services.api.repository import ApiRepository
from shared.mongo import create_client


async def test_the_lone_account_id_index_of_api_keys_is_dropped_at_start(mongo_url: str) -> None:
    client = create_client(mongo_url)
    db = client[f"t_{secrets.token_hex(6)}"]
    try:
        await db["api_keys"].create_index("account_id")  # what an older release made
        repo = ApiRepository(db)
        await repo.ensure_indexes()
        names = set(await db["api_keys"].index_information())
        assert "account_id_1" not in names
        assert "account_id_1__id_-1" in names  # serves every query the old one did
        await repo.ensure_indexes()  # a start without it
    finally:
        await client.drop_database(db.name)
        await client.close()
