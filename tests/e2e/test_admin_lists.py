"""The operator API lists accounts and an account's keys (issue 16): cursors as in v1, and never
a key or its hash."""

import pytest

from tests.support.api import assert_error, ok, walk
from tests.support.stack import Stack

pytestmark = pytest.mark.e2e


def test_accounts_are_listed_newest_first_with_cursors(stack: Stack) -> None:
    with stack.client(headers=stack.admin_headers()) as admin:
        made = [
            ok(admin.post("/admin/v1/accounts", json={"name": f"Lists {n}", "plan": "free"}), 201)
            for n in range(3)
        ]
        first = ok(admin.get("/admin/v1/accounts", params={"limit": 2}))
        assert first["object"] == "list"
        assert [a["id"] for a in first["data"]] == [made[2]["id"], made[1]["id"]]
        assert first["has_more"] is True
        assert set(first["data"][0]) == {"id", "object", "name", "plan", "created_at"}
        everything = [a["id"] for a in walk(admin, "/admin/v1/accounts", 2)]
        assert everything.index(made[2]["id"]) < everything.index(made[0]["id"])
        assert len(everything) == len(set(everything))
        assert_error(
            admin.get("/admin/v1/accounts", params={"starting_after": "pass_x"}),
            400,
            "invalid_request_error",
            param="starting_after",
        )
    with stack.client() as anonymous:
        assert anonymous.get("/admin/v1/accounts").status_code == 401


def test_an_accounts_keys_are_listed_without_secrets(stack: Stack) -> None:
    with stack.client(headers=stack.admin_headers()) as admin:
        account = ok(admin.post("/admin/v1/accounts", json={"name": "Keys", "plan": "paid"}), 201)
        path = f"/admin/v1/accounts/{account['id']}/api_keys"
        extra = ok(admin.post(path, json={"mode": "test"}), 201)
        ok(admin.delete(f"/admin/v1/api_keys/{extra['id']}"))
        # A scanner key is not an API key: it is listed at /v1/scanner_keys, not here (it was,
        # first whatever its age, as an `api_key` the operator could not revoke).
        account_headers = {"Authorization": f"Bearer {account['api_keys']['test']}"}
        with stack.client(headers=account_headers) as client:
            ok(client.post("/v1/scanner_keys", json={"name": "Gate"}))
        keys = ok(admin.get(path))["data"]
        assert [k["mode"] for k in keys] == ["test", "live", "test"]
        assert keys[0]["id"] == extra["id"]
        assert (keys[0]["revoked"], keys[1]["revoked"]) == (True, False)
        assert keys[0]["revoked_at"]
        assert keys[1]["revoked_at"] is None
        for key in keys:
            assert set(key) == {
                "id", "object", "account_id", "mode", "created_at", "revoked", "revoked_at"
            }  # fmt: skip
        listed = str(keys)
        for secret in (*account["api_keys"].values(), extra["key"]):
            assert secret not in listed
        assert_error(admin.get("/admin/v1/accounts/acct_nope/api_keys"), 404, "not_found_error")
