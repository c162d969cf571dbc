"""Every MongoDB call of the issuer: templates, passes, pass files, the outbox, processed commands.

Writes of one command happen in one transaction through `UnitOfWork`, so the record, its
outbox events and the command's stored result are committed together or not at all. An outbox
event may be held (`held_until`) while the issuer pushes the update to devices; the relay
skips it until it is released or the hold runs out (services/issuer/push.py).
"""

import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from pymongo import ASCENDING, DESCENDING
from pymongo.asynchronous.client_session import AsyncClientSession

from shared.models import DownloadLinkRecord, PassRecord, TemplateRecord
from shared.mongo import Database, Document, MongoClient
from shared.pagination import Page, PageRequest, fetch_page

PROCESSED_COMMAND_TTL = timedelta(hours=48)
EXPIRED_LINK_KEPT = timedelta(days=30)


class ConcurrentUpdate(Exception):
    """Another command changed the record between our read and our write; retry the command."""


@dataclass(frozen=True)
class PassFile:
    """A pass's signed .pkpass as stored in `pass_files` (one document per pass).

    `last_modified` is a whole second, strictly later than the previous version's: it is the
    Last-Modified the Apple web service sends, and HTTP dates have no finer resolution, so two
    versions within one second must still differ (docs/wallet-callbacks.md).
    """

    version: int
    data: bytes
    pass_type_identifier: str
    last_modified: datetime

    def to_document(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "data": self.data,
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
        self.outbox = db["outbox"]
        self.processed = db["processed_commands"]
        self.download_links = db["download_links"]

    async def ensure_indexes(self) -> None:
        scope = [("account_id", ASCENDING), ("mode", ASCENDING)]
        await self.templates.create_index([*scope, ("archived", ASCENDING), ("_id", DESCENDING)])
        await self.passes.create_index([*scope, ("_id", DESCENDING)])
        await self.passes.create_index([*scope, ("template_id", ASCENDING), ("_id", DESCENDING)])
        await self.passes.create_index([*scope, ("holder_email", ASCENDING), ("_id", DESCENDING)])
        await self.passes.create_index("short_id", unique=True)
        await self.passes.create_index("serial_number", unique=True)
        await self.passes.create_index("template_id")
        await self.processed.create_index("expires_at", expireAfterSeconds=0)
        await self.download_links.create_index("token_hash", unique=True)
        # Expired links are kept a while so they answer 410 "ask for a fresh link", not 404.
        await self.download_links.create_index(
            "expires_at", expireAfterSeconds=int(EXPIRED_LINK_KEPT.total_seconds())
        )

    @asynccontextmanager
    async def unit_of_work(self) -> AsyncIterator["UnitOfWork"]:
        async with self._client.start_session() as session, await session.start_transaction():
            yield UnitOfWork(self, session)

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

    async def pass_file_stamp(self, pass_id: str) -> datetime | None:
        """The Last-Modified of the pass's current file (None for a file stored without one)."""
        doc = await self.pass_files.find_one({"_id": pass_id}, {"last_modified": 1})
        return None if doc is None else doc.get("last_modified")

    async def outbox_batch(self, now: datetime, limit: int = 100) -> list[Document]:
        """The next events to publish: every event not held, or whose hold has run out."""
        ready = {"$or": [{"held_until": None}, {"held_until": {"$lte": now}}]}
        return [doc async for doc in self.outbox.find(ready).sort("_id", ASCENDING).limit(limit)]

    async def release_outbox(self, event_id: str, payload: bytes) -> None:
        """Let the relay publish a held event, with its final payload."""
        await self.outbox.update_one(
            {"_id": event_id}, {"$set": {"payload": payload, "held_until": None}}
        )

    async def outbox_size(self) -> int:
        """Events committed but not yet published (held ones included)."""
        return await self.outbox.count_documents({})

    async def outbox_done(self, event_ids: list[str]) -> None:
        await self.outbox.delete_many({"_id": {"$in": event_ids}})


class UnitOfWork:
    """The writes of one command, inside one transaction."""

    def __init__(self, repo: IssuerRepository, session: AsyncClientSession):
        self._repo = repo
        self._session = session

    async def insert_template(self, record: TemplateRecord) -> None:
        await self._repo.templates.insert_one(record.to_document(), session=self._session)

    async def replace_template(self, record: TemplateRecord) -> None:
        await self._repo.templates.replace_one(
            {"_id": record.id}, record.to_document(), session=self._session
        )

    async def insert_pass(self, record: PassRecord) -> None:
        await self._repo.passes.insert_one(record.to_document(), session=self._session)

    async def replace_pass(self, record: PassRecord, expected_version: int) -> None:
        """Replace a pass only if nobody changed it since it was read (optimistic locking)."""
        result = await self._repo.passes.replace_one(
            {"_id": record.id, "version": expected_version},
            record.to_document(),
            session=self._session,
        )
        if result.matched_count != 1:
            raise ConcurrentUpdate(record.id)

    async def store_pass_file(self, pass_id: str, file: PassFile, at: datetime) -> None:
        await self._repo.pass_files.replace_one(
            {"_id": pass_id},
            {"_id": pass_id, **file.to_document(), "created_at": at},
            upsert=True,
            session=self._session,
        )

    async def insert_download_link(self, record: DownloadLinkRecord) -> None:
        await self._repo.download_links.insert_one(record.to_document(), session=self._session)

    async def add_outbox(
        self,
        event_id: str,
        subject: str,
        payload: bytes,
        at: datetime,
        held_until: datetime | None = None,
    ) -> None:
        document = {"_id": event_id, "subject": subject, "payload": payload, "created_at": at}
        await self._repo.outbox.insert_one(
            document | {"held_until": held_until}, session=self._session
        )

    async def record_command(self, command_id: str, result: dict[str, Any], at: datetime) -> None:
        await self._repo.processed.insert_one(
            {"_id": command_id, "result": result, "expires_at": at + PROCESSED_COMMAND_TTL},
            session=self._session,
        )


class IssuerReads:
    """Read-only queries the api runs on the issuer's collections (docs/architecture.md)."""

    def __init__(self, db: Database):
        self._templates = db["templates"]
        self._passes = db["passes"]
        self._pass_files = db["pass_files"]
        self._download_links = db["download_links"]

    async def template(self, account_id: str, mode: str, template_id: str) -> TemplateRecord | None:
        doc = await self._templates.find_one(
            {"_id": template_id, "account_id": account_id, "mode": mode}
        )
        return None if doc is None else TemplateRecord.model_validate(doc)

    async def templates_page(self, account_id: str, mode: str, page: PageRequest) -> Page:
        query = {"account_id": account_id, "mode": mode, "archived": False}
        return await fetch_page(self._templates, query, page)

    async def pass_(self, account_id: str, mode: str, pass_id: str) -> PassRecord | None:
        doc = await self._passes.find_one({"_id": pass_id, "account_id": account_id, "mode": mode})
        return None if doc is None else PassRecord.model_validate(doc)

    async def passes_page(
        self,
        account_id: str,
        mode: str,
        page: PageRequest,
        *,
        template_id: str | None = None,
        holder_email: str | None = None,
    ) -> Page:
        query: dict[str, Any] = {"account_id": account_id, "mode": mode}
        if template_id is not None:
            query["template_id"] = template_id
        if holder_email is not None:
            query["holder_email"] = holder_email
        return await fetch_page(self._passes, query, page)

    async def pass_by_short_id(self, short_id: str) -> PassRecord | None:
        doc = await self._passes.find_one({"short_id": short_id})
        return None if doc is None else PassRecord.model_validate(doc)

    async def template_by_id(self, template_id: str) -> TemplateRecord | None:
        doc = await self._templates.find_one({"_id": template_id})
        return None if doc is None else TemplateRecord.model_validate(doc)

    async def download_link(self, token_hash: str) -> DownloadLinkRecord | None:
        doc = await self._download_links.find_one({"token_hash": token_hash})
        return None if doc is None else DownloadLinkRecord.model_validate(doc)

    async def pass_by_id(self, pass_id: str) -> PassRecord | None:
        doc = await self._passes.find_one({"_id": pass_id})
        return None if doc is None else PassRecord.model_validate(doc)

    async def pass_file(self, pass_id: str) -> Document | None:
        return await self._pass_files.find_one({"_id": pass_id})

    async def pass_by_serial(self, serial_number: str) -> PassRecord | None:
        doc = await self._passes.find_one({"serial_number": serial_number})
        return None if doc is None else PassRecord.model_validate(doc)

    async def pass_file_meta(self, pass_id: str) -> Document | None:
        """The stored file's version, pass type and Last-Modified, without its bytes."""
        return await self._pass_files.find_one({"_id": pass_id}, {"data": 0})

    async def pass_versions(self, pass_ids: list[str]) -> dict[str, tuple[str, int]]:
        """pass id -> (serial number, version) for the passes that exist."""
        cursor = self._passes.find({"_id": {"$in": pass_ids}}, {"serial_number": 1, "version": 1})
        return {doc["_id"]: (doc["serial_number"], int(doc["version"])) async for doc in cursor}
