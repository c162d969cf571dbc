"""The reference of the operator API (`/admin/v1/openapi.json`): accounts, API keys and device
logs."""

from services.api.openapi_docs import examples as ex
from services.api.openapi_docs.common import CURSORS, IDEMPOTENT, Doc, one

# Examples, in the style of examples.py.
ACCOUNT_ID = "acct_033XiqtvAEQgCykwK2qGJ1"
API_KEY_ID = "key_033XisQFshZqNsk1EnSpTg"
ACCOUNT_CREATE = {"name": "Acme Live", "plan": "paid"}
ACCOUNT = {
    "id": ACCOUNT_ID,
    "object": "account",
    "name": "Acme Live",
    "plan": "paid",
    "created_at": ex.CREATED,
}
ACCOUNT_CREATED = {
    **ACCOUNT,
    "api_keys": {
        "test": "svc_test_Eu6NF_lGszr5qCUZod-d2k_EsH46O8hx",
        "live": "svc_live_Nfq9Goc9VZ5L2Oq0Y4d3T1OKEU4TF5ls",
    },
}
API_KEY_CREATE = {"mode": "live"}
API_KEY_CREATED = {
    "id": API_KEY_ID,
    "object": "api_key",
    "mode": "live",
    "key": "svc_live_sACatDr9tb7y-E-amd69Aa-46WTf5Beb",
}
API_KEY = {
    "id": API_KEY_ID,
    "object": "api_key",
    "account_id": ACCOUNT_ID,
    "mode": "live",
    "created_at": ex.CREATED,
    "revoked": False,
    "revoked_at": None,
}
REVOKED_API_KEY = {"id": API_KEY_ID, "object": "api_key", "revoked": True, "revoked_at": ex.UPDATED}
DEVICE_LOG_LIST = {
    "object": "list",
    "data": [
        {
            "id": "dlog_033Xj01vygMHHqZ9hVb7Sm",
            "object": "device_log",
            "message": "[2026-06-13 15:02:44 +0000] Get pass task (pass type "
            "pass.com.example.tickets, serial number 6f1c2a8e-3b7d-4e52-9a0c-5d8e7f6a1b2c) "
            "encountered error: "
            "Server response was malformed (Missing response data)",
            "received_at": "2026-06-13T15:02:44.120Z",
        }
    ],
    "has_more": False,
}

ACCOUNTS = "Accounts"
API_KEYS = "API keys"
DEVICE_LOGS = "Device logs"
TAGS: list[dict[str, str]] = [
    {"name": ACCOUNTS, "description": "Accounts and their plans."},
    {"name": API_KEYS, "description": "An account's API keys: shown once, stored as hashes."},
    {"name": DEVICE_LOGS, "description": "What Apple Wallet devices reported to Tessera."},
]
OPERATIONS: dict[tuple[str, str], Doc] = {
    ("post", "/admin/v1/accounts"): Doc(
        ACCOUNTS,
        "Create an account",
        "Creates an account with a test and a live key, shown only in this answer." + IDEMPOTENT,
        request=one(ACCOUNT_CREATE),
        response=one(ACCOUNT_CREATED),
    ),
    ("get", "/admin/v1/accounts"): Doc(
        ACCOUNTS,
        "List accounts",
        "Every account." + CURSORS,
        response=one(ex.listed(ACCOUNT)),
    ),
    ("get", "/admin/v1/accounts/{account_id}"): Doc(
        ACCOUNTS,
        "Retrieve an account",
        "The account; keys are never shown.",
        response=one(ACCOUNT),
    ),
    ("patch", "/admin/v1/accounts/{account_id}"): Doc(
        ACCOUNTS,
        "Change an account's plan",
        "Applies at once on every api replica." + IDEMPOTENT,
        request=one({"plan": "free"}),
        response=one({**ACCOUNT, "plan": "free"}),
    ),
    ("get", "/admin/v1/accounts/{account_id}/api_keys"): Doc(
        API_KEYS,
        "List an account's API keys",
        "Revoked ones too; never a key or its hash." + CURSORS,
        response=one(ex.listed(API_KEY)),
    ),
    ("post", "/admin/v1/accounts/{account_id}/api_keys"): Doc(
        API_KEYS,
        "Create an API key",
        "Another key of the mode sent, shown only in this answer; older keys keep working."
        + IDEMPOTENT,
        request=one(API_KEY_CREATE),
        response=one(API_KEY_CREATED),
    ),
    ("delete", "/admin/v1/api_keys/{key_id}"): Doc(
        API_KEYS,
        "Revoke an API key",
        "The key answers 401 from the next request on, on every api replica.",
        response=one(REVOKED_API_KEY),
    ),
    ("get", "/admin/v1/device_logs"): Doc(
        DEVICE_LOGS,
        "List device logs",
        "What Apple Wallet devices sent to the web service's log endpoint, kept seven days: "
        "the best clue when an update does not arrive." + CURSORS,
        response=one(DEVICE_LOG_LIST),
    ),
}
