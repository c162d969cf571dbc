"""The issuer's MongoDB calls for scans: the `scans` collection, looking a pass up by its
barcode message, and the conditional count of an accepted scan (docs/redemption.md)."""

from datetime import datetime
from typing import Any

from pymongo import ASCENDING, DESCENDING
from pymongo.asynchronous.client_session import AsyncClientSession

from services.issuer.repository import ConcurrentUpdate, with_sparse_fields
from shared.models import Mode, PassRecord, TemplateRecord
from shared.mongo import Database
from shared.scans import ScanRecord


def other_mode(mode: Mode) -> Mode:
    return "live" if mode == "test" else "test"


class ScanStore:
    def __init__(self, db: Database):
        self._scans = db["scans"]
        self._passes = db["passes"]

    async def ensure_indexes(self) -> None:
        scope = [("account_id", ASCENDING), ("mode", ASCENDING)]
        await self._scans.create_index([*scope, ("_id", DESCENDING)])
        await self._scans.create_index([*scope, ("pass_id", ASCENDING), ("_id", DESCENDING)])
        # GET /v1/scans?result=rejected walked every scan of the account without it.
        await self._scans.create_index([*scope, ("result", ASCENDING), ("_id", DESCENDING)])
        await self._passes.create_index([*scope, ("barcode_message", ASCENDING)])

    async def erase_pass_copy(self, record: PassRecord, session: AsyncClientSession) -> None:
        """A redacted pass's copy in its scan records (what a scanner showed) loses the
        holder's name and the field values, and each record the code scanned: a barcode may
        be built from field values (a member number), docs/privacy.md."""
        await self._scans.update_many(
            {"account_id": record.account_id, "mode": record.mode, "pass_id": record.id},
            {
                "$set": {
                    "scanned_pass.holder_name": None,
                    "scanned_pass.field_values": {},
                    "code": None,
                }
            },
            session=session,
        )
        if record.barcode_message:
            # Scans that read its code without naming it: in the other mode (`wrong_mode`), or
            # while another pass showed the same code. Rare enough (a redaction) to look
            # through the account's scans without an index of its own.
            await self._scans.update_many(
                {"account_id": record.account_id, "code": record.barcode_message, "pass_id": None},
                {"$set": {"code": None}},
                session=session,
            )

    async def passes_by_code(self, account_id: str, mode: Mode, code: str) -> list[PassRecord]:
        """At most two passes of the account and mode whose barcode shows `code` (two: it is
        ambiguous)."""
        query = {"account_id": account_id, "mode": mode, "barcode_message": code}
        cursor = self._passes.find(query).limit(2)
        return [PassRecord.model_validate(doc) async for doc in cursor]

    async def in_other_mode(
        self, account_id: str, mode: Mode, *, code: str | None, pass_id: str | None
    ) -> bool:
        """Whether the code (or id) names a pass of the same account in the other mode."""
        query: dict[str, Any] = {"account_id": account_id, "mode": other_mode(mode)}
        if pass_id is not None:
            query["_id"] = pass_id
        else:
            query["barcode_message"] = code
        return await self._passes.find_one(query, {"_id": 1}) is not None

    async def insert(self, record: ScanRecord, session: AsyncClientSession) -> None:
        await self._scans.insert_one(record.to_document(), session=session)

    async def count_redemption(
        self,
        read: PassRecord,
        changes: dict[str, Any],
        at: datetime,
        session: AsyncClientSession,
        *,
        bump_version: bool,
    ) -> None:
        """Add one to the pass's count, only if nobody counted (or voided, or changed its
        limit, or changed it at all, for a re-render) since `read` was read. Inside the
        command's transaction this is what makes concurrent scans of one pass count exactly
        once each: the loser conflicts, and its retry reads the new count and rejects. A
        template update that changed the limit or `on_limit` meanwhile (its transaction sets
        each pass's) makes the scan decide again under the new policy: it would have counted
        past the new limit and written the old one back, or used up a pass without marking it
        used after the update had listed the passes to mark (jobs/update_passes.py)."""
        # A pass stored before redemption existed has no count: null matches a missing field.
        seen: Any = read.redemption_count or {"$in": [0, None]}
        query: dict[str, Any] = {
            "_id": read.id,
            "voided": False,
            "redemption_count": seen,
            "redemption_limit": read.redemption_limit,
            "redemption_on_limit": read.redemption_on_limit,
        }
        if bump_version:
            query["version"] = read.version
        update = with_sparse_fields(
            {"$inc": {"redemption_count": 1}, "$set": {"last_redeemed_at": at, **changes}}
        )
        if bump_version:
            update["$inc"]["version"] = 1
        result = await self._passes.update_one(query, update, session=session)
        if result.matched_count != 1:
            raise ConcurrentUpdate(read.id)

    async def confirm_unchanged(
        self, read: PassRecord, at: datetime, session: AsyncClientSession
    ) -> None:
        """A rejected scan copies the pass it identified (what the scanner shows): only if the
        pass is still the version read. A write to the pass, so that a redaction committing
        meanwhile conflicts with it, or is seen by its retry; otherwise the scan could store
        the holder's data after the redaction erased every copy (docs/privacy.md)."""
        query = {"_id": read.id, "version": read.version, "voided": read.voided}
        result = await self._passes.update_one(
            query, {"$set": {"last_scanned_at": at}}, session=session
        )
        if result.matched_count != 1:
            raise ConcurrentUpdate(read.id)

    async def set_policy(self, template: TemplateRecord, session: AsyncClientSession) -> None:
        """A template's new `max_redemptions` and `on_limit` on each of its passes (the limit is
        what their objects show as `redemptions_remaining`), in the template update's
        transaction. A scan read before it conflicts (`count_redemption`), even where only
        `on_limit` changed: the write changes a value, so no store takes it for a no-op."""
        policy = template.policy()
        scope = {"account_id": template.account_id, "mode": template.mode}
        await self._passes.update_many(
            {**scope, "template_id": template.id},
            {
                "$set": {
                    "redemption_limit": policy.max_redemptions,
                    "redemption_on_limit": policy.on_limit,
                }
            },
            session=session,
        )
