"""`tessera accounts create` makes a working account from the command line."""

import json
import os
import subprocess
import sys

import pytest

from tests.support.stack import Stack

pytestmark = pytest.mark.e2e


def test_accounts_create_prints_keys_that_work(stack: Stack) -> None:
    env = {
        **os.environ,
        "TESSERA_MONGODB_URL": stack.mongo_url,
        "TESSERA_MONGODB_DATABASE": stack.database,
    }
    result = subprocess.run(
        [sys.executable, "-m", "tessera.cli", "accounts", "create",
         "--name", "Acme", "--plan", "paid"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )  # fmt: skip
    created = json.loads(result.stdout)
    assert created["object"] == "account"
    assert created["plan"] == "paid"
    for mode in ("test", "live"):
        key = created["api_keys"][mode]
        assert key.startswith(f"svc_{mode}_")
        with stack.client(headers={"Authorization": f"Bearer {key}"}) as client:
            assert client.get("/v1/passes").status_code == 200
