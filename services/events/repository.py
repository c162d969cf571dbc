"""Every MongoDB call of the events service: `pass_events`, the Google callback nonces, and
the Apple Wallet web service's `registrations` and `device_logs`, with the read classes other
services use on them (`EventReads`, `RegistrationReads`, `DeviceLogReads`)."""

import contextlib
import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pymongo import ASCENDING, DESCENDING
from pymongo.errors import DuplicateKeyError

from shared.ids import new_id
from shared.models import PassEventRecord
from shared.mongo import Database, Document
from shared.pagination import Page, PageRequest, fetch_page


class EventsRepository:
    def __init__(self, db: Database):
        self._events = db["pass_events"]

    async def ensure_indexes(self) -> None:
        scope = [("account_id", ASCENDING), ("mode", ASCENDING)]
        await self._events.create_index([*scope, ("_id", DESCENDING)])
        await self._events.create_index([*scope, ("pass_id", ASCENDING), ("_id", DESCENDING)])

    async def record(self, event: PassEventRecord) -> bool:
        """Store an event once; False when its id was already recorded (a redelivery)."""
        try:
            await self._events.insert_one(event.to_document())
        except DuplicateKeyError:
            return False
        return True


class EventReads:
    """Read-only queries the api runs against `pass_events`."""

    def __init__(self, db: Database):
        self._events = db["pass_events"]

    async def page(
        self, account_id: str, mode: str, page: PageRequest, pass_id: str | None = None
    ) -> Page:
        query = {"account_id": account_id, "mode": mode}
        if pass_id is not None:
            query["pass_id"] = pass_id
        return await fetch_page(self._events, query, page)


# --- Google Wallet callback nonces ---------------------------------------------------------------
# `google_callback_nonces`: one document per verified Google callback, `_id` = its nonce (so the
# nonce is unique). It doubles as the callback's outbox record: it holds the event id before the
# event is published, and `published` says whether it was. Documents go when `expires_at` (past
# the message's own expiry) passes; by then a replay fails the message's expiry check instead.


@dataclass(frozen=True)
class NonceClaim:
    """The event a nonce stands for; `published` once it reached the stream."""

    event_id: str
    created_at: datetime
    published: bool


class GoogleNonces:
    def __init__(self, db: Database):
        self._nonces = db["google_callback_nonces"]

    async def ensure_indexes(self) -> None:
        await self._nonces.create_index("expires_at", expireAfterSeconds=0)

    async def claim(
        self,
        nonce: str,
        *,
        event_id: str,
        pass_id: str,
        event_type: str,
        created_at: datetime,
        expires_at: datetime,
    ) -> NonceClaim:
        """Record the nonce with a new event; when it was seen before, the earlier claim."""
        document = {
            "_id": nonce,
            "event_id": event_id,
            "pass_id": pass_id,
            "event_type": event_type,
            "created_at": created_at,
            "expires_at": expires_at,
            "published": False,
        }
        try:
            await self._nonces.insert_one(document)
        except DuplicateKeyError:
            earlier = await self._nonces.find_one({"_id": nonce})
            if earlier is None:  # expired between the insert and the read: a new claim
                return await self.claim(
                    nonce,
                    event_id=event_id,
                    pass_id=pass_id,
                    event_type=event_type,
                    created_at=created_at,
                    expires_at=expires_at,
                )
            return NonceClaim(earlier["event_id"], earlier["created_at"], earlier["published"])
        return NonceClaim(event_id, created_at, published=False)

    async def mark_published(self, nonce: str) -> None:
        await self._nonces.update_one({"_id": nonce}, {"$set": {"published": True}})


# --- Apple Wallet: device registrations and device logs -----------------------------------------
# `registrations`: one document per (device, pass type, serial), `_id` = `registration_id(...)`,
# so a registration is upserted race-free. The device library identifier is a shared secret
# (it authorizes the serial-number listing), so only its SHA-256 is stored (`device`).
# `device_logs`: what devices POST to /v1/log, kept `DEVICE_LOG_TTL` and at most
# `DEVICE_LOGS_PER_DAY` a day.

DEVICE_LOG_TTL = timedelta(days=7)
DEVICE_LOGS_PER_DAY = 1000


def device_hash(device_library_identifier: str) -> str:
    return hashlib.sha256(device_library_identifier.encode()).hexdigest()


def registration_id(device_library_identifier: str, pass_type: str, serial: str) -> str:
    key = "\n".join((device_library_identifier, pass_type, serial))
    return hashlib.sha256(key.encode()).hexdigest()


class Registrations:
    def __init__(self, db: Database):
        self._registrations = db["registrations"]

    async def ensure_indexes(self) -> None:
        await self._registrations.create_index([("device", ASCENDING), ("pass_type", ASCENDING)])
        await self._registrations.create_index("pass_id")
        await self._registrations.create_index(
            [("pass_type", ASCENDING), ("push_token", ASCENDING)]
        )

    async def upsert(self, document: Document) -> bool:
        """Register, or renew the push token of an existing registration; True when new."""
        fresh = {"push_token": document["push_token"], "updated_at": document["updated_at"]}
        try:
            result = await self._registrations.update_one(
                {"_id": document["_id"]},
                {"$set": fresh, "$setOnInsert": _without(document, fresh)},
                upsert=True,
            )
        except DuplicateKeyError:  # a concurrent first registration won: ours is a renewal
            return await self.upsert(document)
        return result.upserted_id is not None

    async def renew_push_token(
        self, device: str, pass_type: str, push_token: str, at: datetime
    ) -> None:
        """A device has one push token per pass type: its other registrations follow it."""
        await self._registrations.update_many(
            {"device": device, "pass_type": pass_type},
            {"$set": {"push_token": push_token, "updated_at": at}},
        )

    async def delete(self, registration_id: str) -> Document | None:
        return await self._registrations.find_one_and_delete({"_id": registration_id})

    async def restore(self, document: Document) -> None:
        with contextlib.suppress(DuplicateKeyError):  # re-registered meanwhile: keep that one
            await self._registrations.insert_one(document)

    async def of_device(self, device: str, pass_type: str) -> list[Document]:
        cursor = self._registrations.find({"device": device, "pass_type": pass_type})
        return [doc async for doc in cursor]

    async def drop_push_token(
        self, pass_type: str, push_token: str, older_than: datetime | None
    ) -> list[Document]:
        """Delete the registrations using a dead token (not those renewed since it died)."""
        query: dict[str, Any] = {"pass_type": pass_type, "push_token": push_token}
        if older_than is not None:
            query["updated_at"] = {"$lt": older_than}
        dropped = []
        async for doc in self._registrations.find(query, {"_id": 1}):
            if (deleted := await self.delete(doc["_id"])) is not None:
                dropped.append(deleted)
        return dropped


class DeviceLogs:
    def __init__(self, db: Database):
        self._logs = db["device_logs"]

    async def ensure_indexes(self) -> None:
        await self._logs.create_index(
            "received_at", expireAfterSeconds=int(DEVICE_LOG_TTL.total_seconds())
        )
        await self._logs.create_index("day")

    async def add(self, messages: list[str], at: datetime) -> int:
        """Store what fits in today's allowance (roughly: concurrent posts may overshoot by a
        batch); returns how many were stored."""
        day = at.date().isoformat()
        stored_today = await self._logs.count_documents({"day": day}, limit=DEVICE_LOGS_PER_DAY)
        room = messages[: max(0, DEVICE_LOGS_PER_DAY - stored_today)]
        if room:
            await self._logs.insert_many(
                [
                    {"_id": new_id("device_log"), "message": text, "received_at": at, "day": day}
                    for text in room
                ]
            )
        return len(room)


def _without(document: Document, keys: Document) -> Document:
    return {key: value for key, value in document.items() if key not in keys}


class RegistrationReads:
    """Read-only queries the issuer runs on `registrations` to push a pass's devices."""

    def __init__(self, db: Database):
        self._registrations = db["registrations"]

    async def push_tokens(self, pass_id: str) -> list[str]:
        cursor = self._registrations.find({"pass_id": pass_id}, {"push_token": 1})
        return sorted({doc["push_token"] async for doc in cursor})


class DeviceLogReads:
    """Read-only queries the api's operator endpoint runs on `device_logs`."""

    def __init__(self, db: Database):
        self._logs = db["device_logs"]

    async def page(self, page: PageRequest) -> Page:
        return await fetch_page(self._logs, {}, page)
