"""Every MongoDB call of the api: accounts, API keys, idempotency records and limit counters;
its outbox (`api_outbox`, for the events it observes) is the shared one (shared/outbox.py).

Rate-limit windows and monthly pass counters live in MongoDB (atomic conditional `$inc` upserts,
expired by TTL indexes) so that every api replica counts against the same numbers; replicas take
their units in blocks (services/api/leases.py).
"""

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pymongo import ASCENDING, DESCENDING, ReturnDocument
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.errors import DuplicateKeyError

from shared.mongo import Database, Document, drop_index_if_present, unjournaled
from shared.outbox import Outbox
from shared.pagination import Page, PageRequest, fetch_page
from shared.redaction import REFS, copies_query, copy_refs, erase_pass_data
from shared.write_batches import WriteBatches


class ApiRepository:
    def __init__(self, db: Database):
        self._accounts = db["accounts"]
        self._keys = db["api_keys"]
        # Counters and idempotency records need no journal flush of their own (shared/mongo.py).
        self._idempotency = unjournaled(db["idempotency_keys"])
        # Every request with a key claims its record, then finishes or releases it: the
        # concurrent requests' claims go together, as do their finishes (shared/write_batches.py).
        self._idempotency_writes = WriteBatches(self._idempotency)
        self._rate_windows = unjournaled(db["rate_limit_windows"])
        self._usage = unjournaled(db["usage_counters"])
        self.outbox = Outbox(db, owner="api", name="api_outbox")

    async def ensure_indexes(self) -> None:
        await self._keys.create_index("hash", unique=True)
        await self._keys.create_index([("account_id", ASCENDING), ("_id", DESCENDING)])
        # Replaced by the one above (which serves every query it did); an index costs every
        # write of its collection.
        await drop_index_if_present(self._keys, "account_id_1")
        await self._idempotency.create_index("expires_at", expireAfterSeconds=0)
        # What a redaction finds its copies by (erase_pass_copies); not sparse: a record
        # stored before it existed is indexed as null, and found by that.
        await self._idempotency.create_index(REFS)
        await self._rate_windows.create_index("expires_at", expireAfterSeconds=0)
        await self._usage.create_index("expires_at", expireAfterSeconds=0)

    async def accounts_page(self, page: PageRequest) -> Page[Document]:
        """Accounts, newest first (the operator API's list)."""
        return await fetch_page(self._accounts, {}, page, dict)

    async def keys_page(self, account_id: str, page: PageRequest) -> Page[Document]:
        """An account's API keys, revoked ones too, newest first (not its scanner keys)."""
        query = {"account_id": account_id, "kind": {"$ne": "scanner"}}
        return await fetch_page(self._keys, query, page, dict)

    async def insert_account(self, doc: Document) -> None:
        await self._accounts.insert_one(doc)

    async def replace_account(self, doc: Document) -> None:
        """Write an account under its id, replacing one a failed run of the same request made."""
        await self._accounts.replace_one({"_id": doc["_id"]}, doc, upsert=True)

    async def account(self, account_id: str) -> Document | None:
        return await self._accounts.find_one({"_id": account_id})

    async def set_plan(self, account_id: str, plan: str) -> Document | None:
        return await self._accounts.find_one_and_update(
            {"_id": account_id}, {"$set": {"plan": plan}}, return_document=ReturnDocument.AFTER
        )

    async def insert_key(self, doc: Document) -> None:
        await self._keys.insert_one(doc)

    async def replace_key(self, doc: Document) -> None:
        """Write a key under its id, replacing one a failed run of the same request made."""
        await self._keys.replace_one({"_id": doc["_id"]}, doc, upsert=True)

    async def key_by_hash(self, key_hash: str) -> Document | None:
        return await self._keys.find_one({"hash": key_hash})

    async def revoke_key(self, key_id: str, at: datetime) -> Document | None:
        """Revoke a key; a key revoked before keeps its first `revoked_at`."""
        revoked = await self._keys.find_one_and_update(
            {"_id": key_id, "revoked_at": None},
            {"$set": {"revoked_at": at}},
            return_document=ReturnDocument.AFTER,
        )
        return revoked or await self._keys.find_one({"_id": key_id})

    async def scanner_keys_page(
        self, account_id: str, mode: str, page: PageRequest
    ) -> Page[Document]:
        """The account's scanner keys of `mode`, newest first (revoked ones included)."""
        query = {"account_id": account_id, "mode": mode, "kind": "scanner"}
        return await fetch_page(self._keys, query, page, dict)

    async def revoke_scanner_key(
        self, account_id: str, mode: str, key_id: str, at: datetime
    ) -> Document | None:
        """Revoke one of the account's scanner keys (None: it has no such key)."""
        scope = {"_id": key_id, "account_id": account_id, "mode": mode, "kind": "scanner"}
        revoked = await self._keys.find_one_and_update(
            {**scope, "revoked_at": None},
            {"$set": {"revoked_at": at}},
            return_document=ReturnDocument.AFTER,
        )
        return revoked or await self._keys.find_one(scope)

    async def claim_idempotency(self, doc: Document) -> Document | None:
        """Insert a new idempotency record; returns the existing one when the key is taken."""
        if await self._idempotency_writes.insert(doc):
            return None
        return await self._idempotency.find_one({"_id": doc["_id"]})

    async def take_over_idempotency(
        self, record_id: str, stale_lock: datetime, locked_until: datetime
    ) -> bool:
        """Take a processing record whose lock expired; only one contender wins."""
        result = await self._idempotency.update_one(
            {"_id": record_id, "state": "processing", "locked_until": stale_lock},
            {"$set": {"locked_until": locked_until}},
        )
        return result.modified_count == 1

    async def keep_admission(self, record_id: str, admitted: Any) -> None:
        """What a request reserved before its first run, for a retry that takes it over."""
        await self._idempotency.update_one(
            {"_id": record_id, "state": "processing"}, {"$set": {"admitted": admitted}}
        )

    async def mark_once(self, record_id: str, what: str) -> bool:
        """Mark `what` done for the key's request; False if a run of it marked it before."""
        marked = await self._idempotency.update_one(
            {"_id": record_id, f"done.{what}": {"$exists": False}},
            {"$set": {f"done.{what}": True}},
        )
        return marked.modified_count == 1

    async def finish_idempotency(
        self, record_id: str, account_id: str, status: int, body: Any
    ) -> None:
        done = {"state": "done", "response_status": status, "response_body": body}
        await self._idempotency_writes.update(
            {"_id": record_id}, {"$set": {**done, REFS: copy_refs(body, account_id)}}
        )

    async def forget_idempotency(self, record_id: str, command_id: str) -> None:
        """Remove a claim whose command never ran, so the key starts afresh next time."""
        await self._idempotency.delete_one(
            {"_id": record_id, "command_id": command_id, "state": "processing"}
        )

    async def release_idempotency(self, record_id: str, at: datetime) -> None:
        await self._idempotency_writes.update(
            {"_id": record_id, "state": "processing"}, {"$set": {"locked_until": at}}
        )

    async def erase_pass_copies(
        self,
        account_id: str,
        mode: str,
        pass_id: str,
        delivery_ids: Sequence[str] = (),
        code: str | None = None,
    ) -> int:
        """Erase a redacted pass's personal data from the stored answers of idempotent
        requests (a retry still answers, without it): answers that hold the pass, and the
        receiver's answer in the answers of resends of the pass's deliveries (`delivery_ids`).
        `code`, what the pass's barcode showed, is erased from the account's scan answers that
        read it, in either mode (a scan with the other mode's key names no pass). How many
        were rewritten."""
        copies = self._idempotency.find(
            copies_query([pass_id, *delivery_ids], account_id, code),
            {"account_id": 1, "response_body": 1, "mode": 1},
        )
        erased = 0
        async for doc in copies:
            body = doc.get("response_body")
            # A record stored before REFS existed is a candidate of any account (copies_query).
            if doc.get("account_id") != account_id or not isinstance(body, dict):
                continue
            if body.get("object") == "webhook_delivery":
                changed = body.get("id") in delivery_ids and body.get("response_body") is not None
                if changed:
                    body["response_body"] = None
            else:
                changed = doc.get("mode") == mode and erase_pass_data(body, pass_id)
            # A scan that named another pass read that pass's code, which only looks the same.
            read_it = body.get("pass_id") == pass_id or (
                code and body.get("code") == code and body.get("pass_id") is None
            )
            if body.get("object") == "scan" and read_it and body.get("code") is not None:
                body["code"] = None  # a barcode may show a field value (a member number)
                changed = True
            if changed:
                rewritten = {"response_body": body, REFS: copy_refs(body, account_id)}
                await self._idempotency.update_one({"_id": doc["_id"]}, {"$set": rewritten})
                erased += 1
        return erased

    async def window_count(self, window_id: str) -> int:
        """What a rate-limit window has counted so far, without counting."""
        doc = await self._rate_windows.find_one({"_id": window_id}, {"count": 1})
        return 0 if doc is None else int(doc["count"])

    async def uncount_request(self, window_id: str) -> None:
        """Take one request back out of a window (an admin attempt whose token was right)."""
        await self._rate_windows.update_one({"_id": window_id}, {"$inc": {"count": -1}})

    async def count_request(self, window_id: str, expires_at: datetime) -> int:
        """Count one request in a rate-limit window; returns the window's count after it."""
        for attempt in range(2):
            try:
                doc = await self._rate_windows.find_one_and_update(
                    {"_id": window_id},
                    {"$inc": {"count": 1}, "$setOnInsert": {"expires_at": expires_at}},
                    upsert=True,
                    return_document=ReturnDocument.AFTER,
                )
            except DuplicateKeyError:
                # Two replicas created the window at once; the second try finds it.
                if attempt:
                    raise
                continue
            return int(doc["count"]) if doc else 1
        raise AssertionError("unreachable")

    async def lease_window(
        self, window_id: str, want: int, limit: int, expires_at: datetime
    ) -> tuple[int, int]:
        """Take `want` units of a rate-limit window whose allowance is `limit` (or one, when
        fewer are left); returns (units taken, the window's count after), (0, limit) when full."""
        return await _lease(self._rate_windows, window_id, want, limit, expires_at)

    async def lease_usage(
        self, counter_id: str, want: int, limit: int, expires_at: datetime
    ) -> tuple[int, int]:
        """Take `want` units of a monthly pass counter, as `lease_window` does."""
        if limit <= 0:
            return 0, limit
        return await _lease(self._usage, counter_id, want, limit, expires_at)

    async def release_usage(self, counter_id: str, units: int = 1) -> None:
        """Give back reserved units nothing was made with."""
        await self._usage.update_one(
            {"_id": counter_id, "count": {"$gte": units}}, {"$inc": {"count": -units}}
        )

    async def usage(self, counter_id: str) -> int:
        doc = await self._usage.find_one({"_id": counter_id})
        return int(doc["count"]) if doc else 0


async def _lease(
    counters: AsyncCollection[Document],
    counter_id: str,
    want: int,
    limit: int,
    expires_at: datetime,
) -> tuple[int, int]:
    """Add `want` to a counter if that keeps it within `limit`, else one if that does: one
    conditional upsert, never past the limit. A DuplicateKeyError means the counter exists and
    the condition failed (too few left), or another replica created it just now: the next
    (smaller) try tells which."""
    for size in (want, 1):
        try:
            doc = await counters.find_one_and_update(
                {"_id": counter_id, "count": {"$lte": limit - size}},
                {"$inc": {"count": size}, "$setOnInsert": {"expires_at": expires_at}},
                upsert=True,
                return_document=ReturnDocument.AFTER,
            )
        except DuplicateKeyError:
            continue
        return size, int(doc["count"]) if doc else size
    return 0, limit
