"""The development account `tessera up` creates on first start.

Its test key is shown once by the API, so `tessera up` keeps it in DIR/dev-account.json
(mode 0600, inside the user's own data dir) to print it again on later starts. Production
accounts are made with the operator API or `tessera accounts create`, never this way.
"""

import json
import os
from pathlib import Path

from services.api.accounts import create_account
from services.api.repository import ApiRepository
from shared.clock import SystemClock
from shared.mongo import create_client


async def ensure_dev_account(data_dir: Path, mongo_url: str, env: dict[str, str]) -> dict[str, str]:
    path = data_dir / "dev-account.json"
    client = create_client(mongo_url)
    try:
        repo = ApiRepository(client[env.get("TESSERA_MONGODB_DATABASE", "tessera")])
        await repo.ensure_indexes()
        if path.exists():
            saved: dict[str, str] = json.loads(path.read_text())
            if await repo.account(saved["account_id"]) is not None:
                return saved
        created = await create_account(repo, SystemClock(), "Development", "free")
    finally:
        await client.close()
    saved = {"account_id": created["id"], "test_key": created["api_keys"]["test"]}
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump(saved, handle)
    return saved
