"""Every MongoDB call of the events service: `pass_events`, the Google callback nonces, and
the Apple Wallet web service's `registrations`, `device_logs` and `wallet_rate_windows`. What
other services may read of them is in reads.py."""

import contextlib
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from pymongo import ASCENDING, DESCENDING, UpdateOne
from pymongo.errors import DuplicateKeyError

from shared.ids import new_id
from shared.models import PassEventRecord
from shared.mongo import Database, Document


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
# so a device registers a pass once however many requests race. Each holds one of its pass's
# numbered `slot`s, unique per pass, which caps the devices of a pass exactly (`register`).
# The device library identifier is a shared secret (it authorizes the serial-number listing),
# so only its SHA-256 is stored (`device`).
# `device_logs`: what devices POST to /v1/log, kept `DEVICE_LOG_TTL` and at most
# `DEVICE_LOGS_PER_DAY` a day.

DEVICE_LOG_TTL = timedelta(days=7)
DEVICE_LOGS_PER_DAY = 1000
Registered = Literal["created", "renewed", "full"]


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
        # Partial as first created: an index's options cannot change in place.
        await self._registrations.create_index(
            [("pass_id", ASCENDING), ("slot", ASCENDING)],
            unique=True,
            partialFilterExpression={"slot": {"$exists": True}},
        )
        await self._registrations.create_index(
            [("pass_type", ASCENDING), ("push_token", ASCENDING)]
        )

    async def register(self, document: Document, max_per_pass: int) -> Registered:
        """Register a device for a pass in a free slot of the pass's `max_per_pass`, or renew the
        push token of its existing registration; "full" (nothing written) when no slot is free.

        Exact under concurrency: the unique index on (pass_id, slot) lets one of two devices
        that chose the same slot in, and the other looks again. Slots at or past the cap (left
        by a higher cap) only ever decrease, and shrink the range of slots handed out, so a pass
        never has more than `max_per_pass` registrations, whatever races.
        """
        fresh = {"push_token": document["push_token"], "updated_at": document["updated_at"]}
        # Every lost race means another registration got in, so this ends by max_per_pass + 1.
        for _ in range(max_per_pass + 2):
            renewed = await self._registrations.update_one(
                {"_id": document["_id"]}, {"$set": fresh}
            )
            if renewed.matched_count:
                return "renewed"
            slot = await self._free_slot(document["pass_id"], max_per_pass)
            if slot is None:
                return "full"
            try:
                await self._registrations.insert_one(document | {"slot": slot})
            except DuplicateKeyError:  # this device, or another one for this slot, was first
                continue
            return "created"
        return "full"

    async def _free_slot(self, pass_id: str, max_per_pass: int) -> int | None:
        cursor = self._registrations.find({"pass_id": pass_id}, {"slot": 1})
        slots: list[int] = [doc["slot"] async for doc in cursor]
        outside = sum(slot >= max_per_pass for slot in slots)
        taken = set(slots)
        return next((n for n in range(max_per_pass - outside) if n not in taken), None)

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
        # Re-registered meanwhile: keep that one. Its slot taken by another device meanwhile:
        # the removal the device asked for stands (its retry is answered 200, without an event).
        with contextlib.suppress(DuplicateKeyError):
            await self._registrations.insert_one(document)

    async def push_tokens(self, pass_id: str) -> list[str]:
        """The distinct push tokens of a pass's registrations: the devices a live update pushes."""
        cursor = self._registrations.find({"pass_id": pass_id}, {"push_token": 1})
        return sorted({doc["push_token"] async for doc in cursor})

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


class WalletRateWindows:
    """`wallet_rate_windows`: fixed-window request counters of the Apple web service, one
    document per counter and window, `_id` = `<counter>:<window start>`, removed by a TTL
    index once `expires_at` (after its window's end) passes."""

    def __init__(self, db: Database):
        self._windows = db["wallet_rate_windows"]

    async def ensure_indexes(self) -> None:
        await self._windows.create_index("expires_at", expireAfterSeconds=0)

    async def count(self, counters: Sequence[tuple[str, int]], expires_at: datetime) -> bool:
        """Count one request in each (window id, limit) counter not yet at its limit, all in
        one round trip; False when any counter was at its limit already."""
        # A pipeline update counts only below the limit, and a counter at its limit is left
        # as it was, which the server reports as not modified: the sum of modified and
        # upserted counters tells whether all were counted, without reading any back. The
        # filter is an equality on _id alone, so when two requests create a window at once
        # the server retries the loser's upsert as an update (MongoDB 4.2 and later).
        operations = [
            UpdateOne({"_id": window_id}, _count_below(limit, expires_at), upsert=True)
            for window_id, limit in counters
        ]
        result = await self._windows.bulk_write(operations, ordered=False)
        return result.upserted_count + result.modified_count == len(operations)


def _count_below(limit: int, expires_at: datetime) -> list[Document]:
    count = {"$ifNull": ["$count", 0]}
    return [
        {
            "$set": {
                "count": {"$cond": [{"$lt": [count, limit]}, {"$add": [count, 1]}, count]},
                "expires_at": {"$ifNull": ["$expires_at", expires_at]},
            }
        }
    ]
