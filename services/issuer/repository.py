"""Every MongoDB call of the issuer: templates, passes, pass files, processed commands; its
outbox (`outbox`, `outbox_dead_letters`) is the shared one (shared/outbox.py).

Writes of one command happen in one transaction through `UnitOfWork`, so the record, its
outbox events and the command's stored result are committed together or not at all.
"""

import contextlib
import logging
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

from pymongo import ASCENDING, DESCENDING, UpdateOne
from pymongo.asynchronous.client_session import AsyncClientSession
from pymongo.errors import BulkWriteError, ClientBulkWriteException, DuplicateKeyError

from shared.bounded_cache import BoundedCache
from shared.models import DownloadLinkRecord, PassRecord, TemplateRecord, email_key
from shared.mongo import DUPLICATE_KEY, Database, Document, MongoClient, drop_index_if_present
from shared.outbox import Outbox, OutboxMessage, outbox_batch_documents, outbox_document
from shared.pending_writes import PendingWrites
from shared.redaction import REFS, copies_query, copy_refs, erase_pass_data

PROCESSED_COMMAND_TTL = timedelta(hours=48)
# The `issuer_migrations` entries of the holder_email_key and redemption_limit backfills and
# of the null google_sync_due clean-up.
EMAIL_KEYS_MIGRATION = "holder_email_key"
REDEMPTION_LIMITS_MIGRATION = "redemption_limit"
NULL_SYNC_DUE_MIGRATION = "google_sync_due_unset"
LEGACY_EMAIL_INDEX = "account_id_1_mode_1_holder_email_1__id_-1"
EXPIRED_LINK_KEPT = timedelta(days=30)

log = logging.getLogger(__name__)


# Written only by scans (services/issuer/scan_store.py) and template policy changes: a pass
# update, read before a concurrent scan counted, must not write its stale count back.
REDEMPTION_COUNTERS = (
    "redemption_count",
    "last_redeemed_at",
    "redemption_limit",
    "redemption_on_limit",
)
# Absent rather than null when None: their indexes are sparse (services/issuer/google/sync.py).
SPARSE_PASS_FIELDS = ("google_sync_due",)


def pass_changes(record: PassRecord) -> dict[str, Any]:
    """The update that replaces a pass's fields, except its redemption counters."""
    document = record.to_document()
    for name in ("_id", *REDEMPTION_COUNTERS):
        document.pop(name, None)
    for name in SPARSE_PASS_FIELDS:  # left out of the document when None
        document.setdefault(name, None)
    return with_sparse_fields({"$set": document})


def with_sparse_fields(update: dict[str, Any]) -> dict[str, Any]:
    """`update` with the sparse-indexed fields it sets to None unset instead: a null would
    put every pass in the index of the due."""
    fields = dict(update.get("$set", {}))
    unset = dict(update.get("$unset", {}))
    for name in SPARSE_PASS_FIELDS:
        if name in fields and fields[name] is None:
            del fields[name]
            unset[name] = ""
    return {**update, "$set": fields, **({"$unset": unset} if unset else {})}


def pass_changes_since(before: PassRecord, after: PassRecord) -> dict[str, Any]:
    """The update of the fields `after` changed in `before` (its redemption counters aside).
    A pass written at the version it was read at differs from the stored one only there, and
    the store does a third less work for a rollout's few fields than for all of them
    (docs/performance.md)."""
    stored = before.to_document()
    changes = pass_changes(after)
    update: dict[str, Any] = {
        "$set": {k: v for k, v in changes["$set"].items() if stored.get(k) != v}
    }
    unset = {k: "" for k in changes.get("$unset", {}) if k in stored}
    return {**update, "$unset": unset} if unset else update


def is_duplicate(exc: Exception) -> bool:
    """A unique key refused the write: a duplicate insert, or an insert_many's duplicates."""
    if isinstance(exc, DuplicateKeyError):
        return True
    if isinstance(exc, BulkWriteError):
        errors = exc.details.get("writeErrors", [])
        return bool(errors) and all(error.get("code") == DUPLICATE_KEY for error in errors)
    if isinstance(exc, ClientBulkWriteException):  # a unit of work's writes (PendingWrites)
        errors = exc.details.get("writeErrors") or []
        return (
            exc.error is None
            and bool(errors)
            and all(e.get("code") == DUPLICATE_KEY for e in errors)
        )
    return False


class ConcurrentUpdate(Exception):
    """Another command changed the record between our read and our write; retry the command."""


@dataclass(frozen=True)
class PassFile:
    """A pass's signed .pkpass as stored in `pass_files` (one document per pass).

    Only the files that are the pass's own are stored here; the images and strings files it
    shares with its template version are in `template_assets` under `assets_id`, and
    `IssuerReads.pass_file` zips both together (services/issuer/bundle.py).

    `last_modified` is a whole second, strictly later than the previous version's: it is the
    Last-Modified the Apple web service sends, and HTTP dates have no finer resolution, so two
    versions within one second must still differ (docs/wallet-callbacks.md).
    """

    version: int
    pass_json: bytes
    manifest: bytes
    signature: bytes
    assets_id: str
    pass_type_identifier: str
    last_modified: datetime

    def to_document(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "pass_json": self.pass_json,
            "manifest": self.manifest,
            "signature": self.signature,
            "assets_id": self.assets_id,
            "pass_type_identifier": self.pass_type_identifier,
            "last_modified": self.last_modified,
        }


def last_modified_after(moment: datetime, previous: datetime | None) -> datetime:
    """`moment` rounded up to a whole second, and at least one second after `previous`."""
    stamp = datetime.fromtimestamp(math.ceil(moment.timestamp()), UTC)
    if previous is not None:
        stamp = max(stamp, previous + timedelta(seconds=1))
    return stamp


class IssuerRepository:
    def __init__(self, client: MongoClient, db: Database):
        self._client = client
        self.db = db
        self.templates = db["templates"]
        self.passes = db["passes"]
        self.pass_files = db["pass_files"]
        self.template_assets = db["template_assets"]
        # Ids of asset sets known to be stored (they are never deleted): skips the lookup.
        self._stored_assets: BoundedCache[str, bool] = BoundedCache(100_000, lambda _: 1)
        self.outbox = Outbox(db, owner="issuer", name="outbox")
        self.processed = db["processed_commands"]
        self.download_links = db["download_links"]
        # Data migrations a start completed (`_id`: the migration's name), so no start repeats
        # a finished one.
        self.migrations = db["issuer_migrations"]

    async def ensure_indexes(self) -> None:
        scope = [("account_id", ASCENDING), ("mode", ASCENDING)]
        await self.templates.create_index([*scope, ("archived", ASCENDING), ("_id", DESCENDING)])
        await self.passes.create_index([*scope, ("_id", DESCENDING)])
        await self.passes.create_index([*scope, ("template_id", ASCENDING), ("_id", DESCENDING)])
        await self.passes.create_index([*scope, ("voided", ASCENDING), ("_id", DESCENDING)])
        await self.passes.create_index(
            [*scope, ("holder_email_key", ASCENDING), ("_id", DESCENDING)]
        )
        await self.passes.create_index("short_id", unique=True)
        await self.passes.create_index("serial_number", unique=True)
        # Every query by template_id names the account and mode: the compound index above
        # serves it. A lone template_id index (until 2026-11-25) cost every pass write.
        await drop_index_if_present(self.passes, "template_id_1")
        # The holder_email filter reads holder_email_key alone since 2026-11-27 (passes stored
        # before the key existed get it at start: backfill_email_keys_once).
        await drop_index_if_present(self.passes, LEGACY_EMAIL_INDEX)
        await self.processed.create_index("expires_at", expireAfterSeconds=0)
        # What a redaction finds its copies by (erase_pass_copies); not sparse: a result
        # stored before it existed is indexed as null, and found by that.
        await self.processed.create_index(REFS)
        await self.download_links.create_index("token_hash", unique=True)
        # Expired links are kept a while so they answer 410 "ask for a fresh link", not 404.
        await self.download_links.create_index(
            "expires_at", expireAfterSeconds=int(EXPIRED_LINK_KEPT.total_seconds())
        )

    async def backfill_email_keys_once(self) -> int:
        """`backfill_email_keys` at a start, unless an earlier start completed it: its query
        reads every pass (no index serves "has no key"), which on a large store costs each
        start minutes. Completed, it is recorded in `issuer_migrations`; delete that document
        to run it again (docs/operations.md#data-migrations-at-start)."""
        return await self._once(EMAIL_KEYS_MIGRATION, self.backfill_email_keys)

    async def backfill_redemption_limits_once(self) -> int:
        """`backfill_redemption_limits` at a start, unless an earlier start completed it."""
        return await self._once(REDEMPTION_LIMITS_MIGRATION, self.backfill_redemption_limits)

    async def unset_null_sync_due_once(self) -> int:
        """Passes stored before 2026-11-28 hold `google_sync_due: null` (every pass without
        Google credentials, every synced one): the sparse due index held them all. Unset."""
        return await self._once(NULL_SYNC_DUE_MIGRATION, self._unset_null_sync_due)

    async def _unset_null_sync_due(self) -> int:
        result = await self.passes.update_many(
            {"google_sync_due": {"$type": "null"}}, {"$unset": {"google_sync_due": ""}}
        )
        return result.modified_count

    async def _once(self, name: str, migration: Callable[[], Awaitable[int]]) -> int:
        if await self.migrations.find_one({"_id": name}) is not None:
            return 0
        updated = await migration()
        await self.migrations.update_one(
            {"_id": name},
            {"$setOnInsert": {"completed_at": datetime.now(UTC), "updated": updated}},
            upsert=True,
        )
        return updated

    async def backfill_redemption_limits(self) -> int:
        """Give passes stored before redemption policies existed their template's limit, which
        their objects show as `redemptions_remaining` (null reads as unlimited, while scans
        follow the template type's default: a single-use ticket). One update per template, by
        the index that serves its passes; only passes without a limit, so a template change
        that set its passes' limit meanwhile wins. Idempotent."""
        updated = 0
        async for doc in self.templates.find({}):
            template = TemplateRecord.model_validate(doc)
            limit = template.policy().max_redemptions
            result = await self.passes.update_many(
                {
                    "account_id": template.account_id,
                    "mode": template.mode,
                    "template_id": template.id,
                    "redemption_limit": {"$exists": False},
                },
                {"$set": {"redemption_limit": limit}},
            )
            updated += result.modified_count
        return updated

    async def backfill_email_keys(self, batch: int = 1000) -> int:
        """Give passes stored before `holder_email_key` existed their normalised copy, so the
        holder_email filter matches them case-insensitively too; how many were updated. Each
        update is guarded by the address it read, so a concurrent change wins (and writes the
        key itself). Idempotent: every replica may run it at start.

        It returns only once its query found no pass without the key (fewer than a batch: all
        there were, and they have it now). How many a batch modified says nothing: another
        replica starting at once reads the same passes and may write them first, and one that
        stopped there would have its start record the migration done while the rest still
        lack the key (should the other replica die, no later start would give it to them)."""
        updated = 0
        missing = {"holder_email_key": {"$exists": False}, "holder_email": {"$ne": None}}
        while True:
            docs = await self.passes.find(missing, {"holder_email": 1}).limit(batch).to_list()
            if not docs:
                return updated
            result = await self.passes.bulk_write(
                [
                    UpdateOne(
                        {"_id": doc["_id"], "holder_email": doc["holder_email"]},
                        {"$set": {"holder_email_key": email_key(doc["holder_email"])}},
                    )
                    for doc in docs
                ],
                ordered=False,
            )
            updated += result.modified_count
            # Each pass read has its key now (written here, by another replica, or by a change
            # of its address): the next query finds the passes left, none of these.
            if len(docs) < batch:
                return updated

    @asynccontextmanager
    async def unit_of_work(
        self, outbox_lease: Document | None = None
    ) -> AsyncIterator["UnitOfWork"]:
        """A transaction; the writes the unit of work kept are sent together before the commit
        (shared/pending_writes.py), and not at all when the block raises. With `outbox_lease`,
        its outbox documents are written under that lease, for this process to publish once
        the transaction committed (`OutboxRelay.publish_committed`)."""
        async with self._client.start_session() as session, await session.start_transaction():
            uow = UnitOfWork(self, session, PendingWrites(self._client, session), outbox_lease)
            yield uow
            await uow.flush()

    async def processed_result(self, command_id: str) -> dict[str, Any] | None:
        doc = await self.processed.find_one({"_id": command_id})
        return None if doc is None else dict(doc["result"])

    async def template(self, account_id: str, mode: str, template_id: str) -> TemplateRecord | None:
        doc = await self.templates.find_one(
            {"_id": template_id, "account_id": account_id, "mode": mode}
        )
        return None if doc is None else TemplateRecord.model_validate(doc)

    async def pass_(self, account_id: str, mode: str, pass_id: str) -> PassRecord | None:
        doc = await self.passes.find_one({"_id": pass_id, "account_id": account_id, "mode": mode})
        return None if doc is None else PassRecord.model_validate(doc)

    async def store_assets(
        self, assets_id: str, files: Sequence[tuple[str, bytes]], at: datetime
    ) -> None:
        """Store a template version's shared files once, before a pass file refers to them.

        Outside any transaction and idempotent: `assets_id` is a digest of the files, so a
        replica that stored them first stored the same bytes.
        """
        if self._stored_assets.get(assets_id):
            return
        if await self.template_assets.find_one({"_id": assets_id}, {"_id": 1}) is None:
            document = {
                "_id": assets_id,
                "files": [{"name": name, "data": data} for name, data in files],
                "created_at": at,
            }
            with contextlib.suppress(DuplicateKeyError):
                await self.template_assets.insert_one(document)
        self._stored_assets.put(assets_id, True)

    async def pass_file_stamp(self, pass_id: str) -> datetime | None:
        """The Last-Modified of the pass's current file (None for a file stored without one)."""
        doc = await self.pass_files.find_one({"_id": pass_id}, {"last_modified": 1})
        return None if doc is None else doc.get("last_modified")

    # --- passes in bulk: template rollouts and update_passes jobs (services/issuer/jobs/) ---

    async def live_pass_ids(self, account_id: str, mode: str, template_id: str) -> list[str]:
        """The ids of the template's passes that are not voided, oldest first."""
        cursor = self.passes.find(
            {"account_id": account_id, "mode": mode, "template_id": template_id, "voided": False},
            {"_id": 1},
        )
        return [str(doc["_id"]) async for doc in cursor.sort("_id", ASCENDING)]

    async def unmarked_pass_ids_at(
        self,
        account_id: str,
        mode: str,
        template_id: str,
        limit: int,
        session: AsyncClientSession | None = None,
    ) -> list[str]:
        """The template's passes, not voided and not rendered as used, redeemed `limit` times
        or more, oldest first."""
        cursor = self.passes.find(
            {
                "account_id": account_id,
                "mode": mode,
                "template_id": template_id,
                "voided": False,
                "used_up": {"$ne": True},
                "redemption_count": {"$gte": limit},
            },
            {"_id": 1},
            session=session,
        )
        return [str(doc["_id"]) async for doc in cursor.sort("_id", ASCENDING)]

    async def stale_pass_ids(
        self, account_id: str, mode: str, template_id: str, design_version: int
    ) -> list[str]:
        """The template's passes, not voided, built from a design older than `design_version`
        (a pass stored before design_version existed reads as 1), oldest first."""
        cursor = self.passes.find(
            {
                "account_id": account_id,
                "mode": mode,
                "template_id": template_id,
                "voided": False,
                "design_version": {"$not": {"$gte": design_version}},
            },
            {"_id": 1},
        )
        return [str(doc["_id"]) async for doc in cursor.sort("_id", ASCENDING)]

    async def passes_by_id(
        self, account_id: str, mode: str, pass_ids: Sequence[str]
    ) -> dict[str, PassRecord]:
        cursor = self.passes.find(
            {"_id": {"$in": list(pass_ids)}, "account_id": account_id, "mode": mode}
        )
        return {str(doc["_id"]): PassRecord.model_validate(doc) async for doc in cursor}

    async def file_stamp(self, record: PassRecord) -> datetime | None:
        """The Last-Modified of the pass's current file: kept on the pass, else read."""
        if record.file_modified_at is not None:
            return record.file_modified_at
        return await self.pass_file_stamp(record.id)

    async def file_stamps(self, records: Sequence[PassRecord]) -> dict[str, datetime | None]:
        """`file_stamp` of many passes, in one query for those that do not keep theirs."""
        stamps: dict[str, datetime | None] = {
            record.id: record.file_modified_at for record in records
        }
        unknown = [pass_id for pass_id, stamp in stamps.items() if stamp is None]
        if unknown:
            cursor = self.pass_files.find({"_id": {"$in": unknown}}, {"last_modified": 1})
            stamps |= {str(doc["_id"]): doc.get("last_modified") async for doc in cursor}
        return stamps


class UnitOfWork:
    """The writes of one command, inside one transaction.

    The writes that need no answer before the commit (inserts, a pass's new file, its
    optimistic-locking update, outbox events, processed markers) are kept and sent together
    when the unit of work ends (`flush`): one round trip for a created pass's four writes. A
    write that must be answered at once (a template's versioned replace, an erasure) sends
    what was kept first, so the writes reach the store in the order they were made.
    """

    def __init__(
        self,
        repo: IssuerRepository,
        session: AsyncClientSession,
        pending: PendingWrites,
        outbox_lease: Document | None = None,
    ):
        self._repo = repo
        self._session = session
        self._pending = pending
        self._outbox_lease = outbox_lease or {}
        # The outbox documents written, as written (what `publish_committed` publishes).
        self.outbox_documents: list[Document] = []

    @property
    def session(self) -> AsyncClientSession:
        """For the writes of other stores of the issuer in the same transaction (jobs). They
        write other collections than the kept writes, whose order with them is then free."""
        return self._session

    async def flush(self) -> None:
        """Send the kept writes now (a duplicate key, a write conflict or a changed pass
        raises here)."""
        await self._pending.flush()

    async def insert_template(self, record: TemplateRecord) -> None:
        self._pending.insert(self._repo.templates, record.to_document())

    async def replace_template(self, record: TemplateRecord) -> None:
        self._pending.replace(self._repo.templates, {"_id": record.id}, record.to_document())

    async def insert_pass(self, record: PassRecord) -> None:
        self._pending.insert(self._repo.passes, record.to_document())

    async def replace_pass(self, record: PassRecord, expected_version: int) -> None:
        """Replace a pass only if nobody changed it since it was read (optimistic locking):
        the flush raises ConcurrentUpdate otherwise."""
        self._pending.update(
            self._repo.passes,
            {"_id": record.id, "version": expected_version},
            pass_changes(record),
            must_match=lambda: ConcurrentUpdate(record.id),
        )

    async def store_pass_file(self, pass_id: str, file: PassFile, at: datetime) -> None:
        self._pending.replace(
            self._repo.pass_files,
            {"_id": pass_id},
            {"_id": pass_id, **file.to_document(), "created_at": at},
            upsert=True,
        )

    async def insert_download_link(self, record: DownloadLinkRecord) -> None:
        self._pending.insert(self._repo.download_links, record.to_document())

    async def insert_new_passes(self, passes: Sequence[tuple[PassRecord, PassFile]]) -> None:
        """New passes and their files (a batch, a chunk of a job)."""
        for record, _ in passes:
            self._pending.insert(self._repo.passes, record.to_document())
        for record, file in passes:
            document = {"_id": record.id, **file.to_document(), "created_at": record.updated_at}
            self._pending.insert(self._repo.pass_files, document)

    async def replace_passes(self, changes: Sequence[tuple[PassRecord, PassRecord]]) -> None:
        """Change many passes (each as `before`, read earlier, and `after`), each only if it is
        still at the version it was read at: one that changed meanwhile raises
        ConcurrentUpdate (the caller prepares again from fresh reads). Only the fields that
        changed are written (`pass_changes_since`).

        The versions are read first, in the transaction (one query), then each pass is
        updated by its id alone. A pass another transaction changes after that read makes
        the update a write conflict (snapshot isolation: the store refuses to write over a
        change this transaction did not see), which the caller runs again from the read. The
        same check as a filter on the id and the version cost the store a query plan per
        statement: 1.43 ms against 0.95 ms + 0.08 ms per pass on the development store
        (docs/performance.md, Rollout)."""
        if not changes:
            return
        await self.flush()  # the read below sees what this unit of work wrote so far
        ids = [after.id for before, after in changes]
        found = self._repo.passes.find({"_id": {"$in": ids}}, {"version": 1}, session=self._session)
        versions = {doc["_id"]: doc.get("version") async for doc in found}
        for before, after in changes:
            if versions.get(after.id) != before.version:
                raise ConcurrentUpdate(after.id)
        for before, after in changes:
            self._pending.update(
                self._repo.passes,
                {"_id": after.id},
                pass_changes_since(before, after),
                must_match=partial(ConcurrentUpdate, after.id),
            )

    async def store_pass_files(self, files: Sequence[tuple[str, PassFile, datetime]]) -> None:
        """`store_pass_file` of many passes (pass id, file, at)."""
        for pass_id, file, at in files:
            await self.store_pass_file(pass_id, file, at)

    async def replace_template_at(self, record: TemplateRecord, read: TemplateRecord) -> None:
        """Replace a template only while it is as `read` found it: at its `design_version` (a
        design change counts its versions: two concurrent ones must not both make the same
        next version) and its `updated_at` (a change of its name or flags, which keeps the
        version, must not be undone by a change prepared from an earlier read)."""
        at: Any = {"$in": [1, None]} if read.design_version == 1 else read.design_version
        await self.flush()
        result = await self._repo.templates.replace_one(
            {"_id": record.id, "design_version": at, "updated_at": read.updated_at},
            record.to_document(),
            session=self._session,
        )
        if result.matched_count != 1:
            raise ConcurrentUpdate(record.id)

    async def add_outbox(self, message: OutboxMessage, at: datetime) -> None:
        document = {**outbox_document(message, at), **self._outbox_lease}
        self._pending.insert(self._repo.outbox.documents, document)
        self.outbox_documents.append(document)

    async def add_outbox_many(self, messages: Sequence[OutboxMessage], at: datetime) -> None:
        """Several events, in as few outbox documents as they fit (`outbox_batch_documents`:
        one insert and, once published, one delete for a whole chunk); the relay is woken by
        the caller once the transaction committed."""
        for document in outbox_batch_documents(messages, at):
            document |= self._outbox_lease
            self._pending.insert(self._repo.outbox.documents, document)
            self.outbox_documents.append(document)

    async def erase_pass_copies(
        self, pass_id: str, code: str | None = None, account_id: str | None = None
    ) -> None:
        """Erase the pass's personal data from the stored results of commands: a retried
        request still answers, without it (shared/redaction.py). `code`: what its barcode
        showed, erased from the results of the account's scans that read it without naming
        the pass (a scan in the other mode, a code two passes showed)."""
        await self.flush()
        reads_code = bool(code and account_id)
        copies = self._repo.processed.find(
            copies_query([pass_id], account_id, code), {"result": 1}, session=self._session
        )
        async for doc in copies:
            result = doc["result"]
            if not isinstance(result, dict):
                continue
            changed = erase_pass_data(result, pass_id)
            read_it = result.get("pass_id") == pass_id or (
                reads_code
                and result.get("account_id") == account_id
                and result.get("code") == code
                and result.get("pass_id") is None
            )
            if read_it and result.get("code") is not None:
                result["code"] = None  # a scan's code may be built from the field values
                changed = True
            if changed:
                rewritten = {"result": result, REFS: copy_refs(result, result.get("account_id"))}
                await self._repo.processed.update_one(
                    {"_id": doc["_id"]}, {"$set": rewritten}, session=self._session
                )

    async def record_command(self, command_id: str, result: dict[str, Any], at: datetime) -> None:
        document = {
            "_id": command_id,
            "result": result,
            REFS: copy_refs(result, result.get("account_id")),
            "expires_at": at + PROCESSED_COMMAND_TTL,
        }
        self._pending.insert(self._repo.processed, document)
