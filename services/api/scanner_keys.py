"""Scanner keys: restricted keys for staff at a gate, which may call POST /v1/scans and nothing
else (docs/redemption.md). Stored in `api_keys` like secret keys (only their SHA-256, shown
once, authenticated and cached by the same code) with `kind: "scanner"` and a name; revoking
one invalidates it on every api replica before the revoke answers (principals.py)."""

import secrets
from typing import Any

from services.api.accounts import SCANNER_KEY_PREFIXES, Principal, hash_key
from services.api.principals import PrincipalCache
from services.api.repository import ApiRepository
from services.api.scan_objects import ScannerKeyCreated, ScannerKeyObject
from shared.clock import Clock, iso
from shared.errors import AuthorizationError, not_found
from shared.ids import derived_id, has_prefix, id_time_ms


def require_secret_key(principal: Principal) -> None:
    """Only an account's secret key manages its scanner keys."""
    if principal.scanner:
        raise AuthorizationError(
            "A scanner key cannot manage scanner keys; use the account's secret key.",
            code="scanner_key_not_allowed",
        )


def key_object(doc: dict[str, Any]) -> ScannerKeyObject:
    revoked_at = doc.get("revoked_at")
    return ScannerKeyObject(
        id=doc["_id"],
        name=doc["name"],
        mode=doc["mode"],
        revoked=revoked_at is not None,
        revoked_at=None if revoked_at is None else iso(revoked_at),
        created_at=iso(doc["created_at"]),
    )


async def create_scanner_key(
    repo: ApiRepository, clock: Clock, principal: Principal, name: str, made_by: str
) -> ScannerKeyCreated:
    """A new scanner key. `made_by`: the request's command id. A retry of the request (its
    first run failed after writing, so its key was never shown) makes the same key id with a
    new secret, which replaces the unseen one: one key per request, as for API keys
    (services/api/accounts.py)."""
    key = SCANNER_KEY_PREFIXES[principal.mode] + secrets.token_urlsafe(24)
    doc = {
        "_id": derived_id("scanner_key", id_time_ms(made_by), f"{made_by}:scanner"),
        "hash": hash_key(key),
        "account_id": principal.account_id,
        "mode": principal.mode,
        "kind": "scanner",
        "name": name,
        "created_at": clock.now(),
        "revoked_at": None,
    }
    await repo.replace_key(doc)
    return ScannerKeyCreated(**key_object(doc).model_dump(), key=key)


async def revoke_scanner_key(
    repo: ApiRepository,
    principals: PrincipalCache,
    clock: Clock,
    principal: Principal,
    key_id: str,
) -> ScannerKeyObject:
    if not has_prefix(key_id, "scanner_key"):
        raise not_found("scanner key", key_id)
    doc = await repo.revoke_scanner_key(principal.account_id, principal.mode, key_id, clock.now())
    if doc is None:
        raise not_found("scanner key", key_id)
    # Also when it was revoked before: a retry after a 500 here repeats the invalidation.
    await principals.invalidate(key_id=key_id)
    return key_object(doc)


# (method, route) pairs a scanner key may call: the scan API, which the scanner page posts to.
SCANNER_ROUTES: frozenset[tuple[str, str]] = frozenset({("POST", "/v1/scans")})


def refuse_scanner_key(principal: Principal, method: str, route: str | None) -> None:
    """403 for a scanner key anywhere but SCANNER_ROUTES (`route` is the route's template)."""
    if principal.scanner and (method, route) not in SCANNER_ROUTES:
        raise AuthorizationError(
            "A scanner key may only scan (POST /v1/scans); use the account's secret key.",
            code="scanner_key_not_allowed",
        )
