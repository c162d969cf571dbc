"""Accounts and API keys: creation, plans, authentication of a presented key.

Keys are `svc_test_`/`svc_live_` followed by 192 random bits; only their SHA-256 is stored and
the stored hash is compared in constant time. A key is shown once, when it is created.
"""

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import Any, Literal

from services.api.repository import ApiRepository
from shared.clock import Clock, iso
from shared.errors import AuthenticationError, not_found
from shared.ids import derived_id, id_time_ms, new_id
from shared.models import Mode

Plan = Literal["free", "paid"]
KEY_PREFIXES: dict[Mode, str] = {"test": "svc_test_", "live": "svc_live_"}
# Scanner keys (services/api/scanner_keys.py) may only scan: POST /v1/scans.
SCANNER_KEY_PREFIXES: dict[Mode, str] = {"test": "svc_scan_test_", "live": "svc_scan_live_"}


@dataclass(frozen=True)
class Principal:
    account_id: str
    mode: Mode
    plan: str
    key_id: str
    # A scanner key's principal: deps.py lets it call POST /v1/scans and nothing else.
    scanner: bool = False


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def key_mode(key: str) -> Mode | None:
    for prefixes in (KEY_PREFIXES, SCANNER_KEY_PREFIXES):
        for mode, prefix in prefixes.items():
            if key.startswith(prefix) and len(key) > len(prefix):
                return mode
    return None


def account_object(doc: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": doc["_id"],
        "object": "account",
        "name": doc["name"],
        "plan": doc["plan"],
        "created_at": iso(doc["created_at"]),
    }


def api_key_object(doc: dict[str, Any]) -> dict[str, Any]:
    """A key as the operator API lists it: never the key nor its hash."""
    revoked_at = doc.get("revoked_at")
    return {
        "id": doc["_id"],
        "object": "api_key",
        "account_id": doc["account_id"],
        "mode": doc["mode"],
        "created_at": iso(doc["created_at"]),
        "revoked": revoked_at is not None,
        "revoked_at": None if revoked_at is None else iso(revoked_at),
    }


async def create_key(
    repo: ApiRepository, clock: Clock, account_id: str, mode: Mode, made_by: str | None = None
) -> dict[str, Any]:
    """A new key of the account. `made_by`: the operator request's command id. A retry of that
    request (its first run failed after writing, so its key was never shown) makes the same
    key id with a new secret, which replaces the unseen one: one key per request."""
    key = KEY_PREFIXES[mode] + secrets.token_urlsafe(24)
    doc = {
        "_id": _made_id("api_key", made_by, mode),
        "hash": hash_key(key),
        "account_id": account_id,
        "mode": mode,
        "created_at": clock.now(),
        "revoked_at": None,
    }
    await (repo.insert_key(doc) if made_by is None else repo.replace_key(doc))
    return {"id": doc["_id"], "object": "api_key", "mode": mode, "key": key}


async def create_account(
    repo: ApiRepository, clock: Clock, name: str, plan: Plan, made_by: str | None = None
) -> dict[str, Any]:
    """A new account with a test and a live key; `made_by` as for `create_key`: a retry makes
    the same account, not a second one."""
    account_id = _made_id("account", made_by, "account")
    doc = {"_id": account_id, "name": name, "plan": plan, "created_at": clock.now()}
    await (repo.insert_account(doc) if made_by is None else repo.replace_account(doc))
    test = await create_key(repo, clock, account_id, "test", made_by)
    live = await create_key(repo, clock, account_id, "live", made_by)
    return {**account_object(doc), "api_keys": {"test": test["key"], "live": live["key"]}}


# Where each part of one request sorts among ids of its millisecond: the account's keys list
# newest first, and its live key is made after its test key.
_ORDER = {"account": 0, "test": 0, "live": 1}


def _made_id(kind: str, made_by: str | None, part: str) -> str:
    if made_by is None:
        return new_id(kind)
    return derived_id(kind, id_time_ms(made_by) + _ORDER[part], f"{made_by}:{part}")


async def account_or_404(repo: ApiRepository, account_id: str) -> dict[str, Any]:
    doc = await repo.account(account_id)
    if doc is None:
        raise not_found("account", account_id)
    return doc


async def authenticate(repo: ApiRepository, presented: str | None) -> Principal:
    if not presented:
        raise AuthenticationError(
            "No API key provided. Send 'Authorization: Bearer <API_KEY>'.", code="missing_api_key"
        )
    mode = key_mode(presented)
    if mode is None:
        raise AuthenticationError("Invalid API key provided.", code="invalid_api_key")
    wanted = hash_key(presented)
    doc = await repo.key_by_hash(wanted)
    if doc is None or not hmac.compare_digest(doc["hash"], wanted) or doc["revoked_at"]:
        raise AuthenticationError("Invalid API key provided.", code="invalid_api_key")
    account = await repo.account(doc["account_id"])
    if account is None:
        raise AuthenticationError("Invalid API key provided.", code="invalid_api_key")
    # Whether the plan allows live keys is the plan table's `live_keys` (limits.py), checked
    # with the rate limit on every authenticated request.
    return Principal(
        account_id=account["_id"],
        mode=mode,
        plan=account["plan"],
        key_id=doc["_id"],
        scanner=doc.get("kind") == "scanner",
    )
