"""Every MongoDB call of the events service: `pass_events`, the Google callback nonces, and
the Apple Wallet web service's `registrations`, `update_tags`, `device_logs` and
`wallet_rate_windows`. What other services may read of them is in reads.py. A registration, an
unregistration and a nonce commit with their event, written to the service's outbox
(events_out.py) in one transaction."""

import contextlib
import hashlib
from collections.abc import Awaitable, Sequence
from datetime import datetime, timedelta
from functools import partial
from typing import Literal

from pymongo import ASCENDING, DESCENDING, ReturnDocument, UpdateOne
from pymongo.asynchronous.client_session import AsyncClientSession
from pymongo.errors import BulkWriteError, DuplicateKeyError

from shared.ids import new_id
from shared.messages import PassEventMessage
from shared.models import PassEventRecord
from shared.mongo import Database, Document, duplicates_only
from shared.outbox import Outbox


class EventsRepository:
    def __init__(self, db: Database):
        self._events = db["pass_events"]

    async def ensure_indexes(self) -> None:
        scope = [("account_id", ASCENDING), ("mode", ASCENDING)]
        await self._events.create_index([*scope, ("_id", DESCENDING)])
        await self._events.create_index([*scope, ("pass_id", ASCENDING), ("_id", DESCENDING)])
        await self._events.create_index([*scope, ("type", ASCENDING), ("_id", DESCENDING)])

    async def record(self, event: PassEventRecord) -> bool:
        """Store an event once; False when its id was already recorded (a redelivery)."""
        return await self.record_many([event]) == 1

    async def erase_metadata(self, account_id: str, mode: str, pass_id: str, kept: str) -> None:
        """A redacted pass's events keep their type and time, not their metadata (which may
        repeat what the pass held, or a scanner's notes): all but the redaction's own."""
        await self._events.update_many(
            {"account_id": account_id, "mode": mode, "pass_id": pass_id, "_id": {"$ne": kept}},
            {"$set": {"metadata": {}}},
        )

    async def record_many(self, events: Sequence[PassEventRecord]) -> int:
        """Store a batch with one unordered insert; events whose id was recorded before (a
        redelivery) are skipped without failing the others. How many were new."""
        if not events:
            return 0
        try:
            result = await self._events.insert_many(
                [event.to_document() for event in events], ordered=False
            )
        except BulkWriteError as exc:
            # Anything but a duplicate re-raises: the batch is then delivered again.
            return len(events) - len(duplicates_only(exc))
        return len(result.inserted_ids)


# --- Google Wallet callback nonces ---------------------------------------------------------------
# `google_callback_nonces`: one document per verified Google callback, `_id` = its nonce (so the
# nonce is unique), committed with the callback's event. Documents go when `expires_at` (past
# the message's own expiry) passes; by then a replay fails the message's expiry check instead.


class _Taken(Exception):
    """The unique key of a write is taken already: the transaction is abandoned."""


class GoogleNonces:
    def __init__(self, db: Database, outbox: Outbox):
        self._nonces = db["google_callback_nonces"]
        self._outbox = outbox

    async def ensure_indexes(self) -> None:
        await self._nonces.create_index("expires_at", expireAfterSeconds=0)

    async def record(self, nonce: str, event: PassEventMessage, expires_at: datetime) -> bool:
        """Store the nonce and its event in one transaction; False, and nothing written, when
        the nonce was seen before (a replay)."""
        document = {
            "_id": nonce,
            "event_id": event.id,
            "pass_id": event.pass_id,
            "event_type": event.event_type,
            "created_at": event.created_at,
            "expires_at": expires_at,
        }

        async def write(session: AsyncClientSession) -> None:
            await _insert_once(self._nonces.insert_one(document, session=session))
            await self._outbox.add(event, event.created_at, session)

        try:
            await self._outbox.in_transaction(write)
        except _Taken:
            return False
        return True


async def _insert_once(insert: Awaitable[object]) -> None:
    """Await an insert, raising `_Taken` for a duplicate key (only that insert's: a duplicate
    elsewhere in the transaction stays an error)."""
    try:
        await insert
    except DuplicateKeyError as exc:
        raise _Taken from exc


# --- Apple Wallet: device registrations and device logs -----------------------------------------
# `registrations`: one document per (device, pass type, serial), `_id` = `registration_id(...)`,
# so a device registers a pass once however many requests race. Each holds one of its pass's
# numbered `slot`s, unique per pass, which caps the devices of a pass exactly (`register`).
# The device library identifier is a shared secret (it authorizes the serial-number listing),
# so only its SHA-256 is stored (`device`).
# `update_tags`: the update tags too long to hand to a device (services/events/update_tags.py),
# one document per (device, pass type), `_id` = `_tags_id(...)`, holding the last `KEPT_TAGS`
# as `{"id", "tag"}`; removed `TAG_RETENTION` after the last one was handed out.
# `device_logs`: what devices POST to /v1/log, kept `DEVICE_LOG_TTL` and at most
# `DEVICE_LOGS_PER_DAY` a day, of which one client address has at most
# `DEVICE_LOGS_PER_ADDRESS_PER_DAY` (ten posts from one address took the whole day).

DEVICE_LOG_TTL = timedelta(days=7)
DEVICE_LOGS_PER_DAY = 1000
DEVICE_LOGS_PER_ADDRESS_PER_DAY = 100
# A device sends back the last tag it got, or the one before when an answer was lost.
KEPT_TAGS = 4
TAG_RETENTION = timedelta(days=30)
Registered = Literal["created", "renewed", "full"]


def device_hash(device_library_identifier: str) -> str:
    return hashlib.sha256(device_library_identifier.encode()).hexdigest()


def registration_id(device_library_identifier: str, pass_type: str, serial: str) -> str:
    key = "\n".join((device_library_identifier, pass_type, serial))
    return hashlib.sha256(key.encode()).hexdigest()


def _tags_id(device: str, pass_type: str) -> str:
    return hashlib.sha256(f"{device}\n{pass_type}".encode()).hexdigest()


class Registrations:
    def __init__(self, db: Database, outbox: Outbox):
        self._registrations = db["registrations"]
        self._tags = db["update_tags"]
        self._outbox = outbox

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
        await self._tags.create_index("expires_at", expireAfterSeconds=0)

    async def register(
        self, document: Document, max_per_pass: int, installed: PassEventMessage
    ) -> Registered:
        """Register a device for a pass in a free slot of the pass's `max_per_pass`, committed
        with its `installed` event, or renew the push token of its existing registration (no
        event); "full" (nothing written) when no slot is free.

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
                await self._outbox.in_transaction(partial(self._insert, document, slot, installed))
            except _Taken:  # this device, or another one for this slot, was first
                continue
            return "created"
        return "full"

    async def _free_slot(self, pass_id: str, max_per_pass: int) -> int | None:
        cursor = self._registrations.find({"pass_id": pass_id}, {"slot": 1})
        slots: list[int] = [doc["slot"] async for doc in cursor]
        outside = sum(slot >= max_per_pass for slot in slots)
        taken = set(slots)
        return next((n for n in range(max_per_pass - outside) if n not in taken), None)

    async def _insert(
        self,
        document: Document,
        slot: int,
        installed: PassEventMessage,
        session: AsyncClientSession,
    ) -> None:
        await _insert_once(
            self._registrations.insert_one(document | {"slot": slot}, session=session)
        )
        await self._outbox.add(installed, installed.created_at, session)

    async def renew_push_token(
        self, device: str, pass_type: str, push_token: str, at: datetime
    ) -> None:
        """A device has one push token per pass type: its other registrations follow it."""
        await self._registrations.update_many(
            {"device": device, "pass_type": pass_type},
            {"$set": {"push_token": push_token, "updated_at": at}},
        )

    async def unregister(
        self, registration_id: str, removed: PassEventMessage | None, still: Document | None = None
    ) -> Document | None:
        """Delete a registration (if it still matches `still`), committed with its `removed`
        event; the registration deleted, or None (nothing written) when there was none."""

        async def write(session: AsyncClientSession) -> Document | None:
            query = {"_id": registration_id, **(still or {})}
            deleted = await self._registrations.find_one_and_delete(query, session=session)
            if deleted is not None and removed is not None:
                await self._outbox.add(removed, removed.created_at, session)
            return deleted

        return await self._outbox.in_transaction(write)

    async def push_tokens(self, pass_id: str) -> list[str]:
        """The distinct push tokens of a pass's registrations: the devices a live update pushes."""
        cursor = self._registrations.find({"pass_id": pass_id}, {"push_token": 1})
        return sorted({doc["push_token"] async for doc in cursor})

    async def push_tokens_of(self, pass_ids: list[str]) -> dict[str, list[str]]:
        """`push_tokens` of many passes with one query: pass id -> its distinct tokens."""
        found: dict[str, set[str]] = {}
        cursor = self._registrations.find(
            {"pass_id": {"$in": pass_ids}}, {"pass_id": 1, "push_token": 1}
        )
        async for doc in cursor:
            found.setdefault(doc["pass_id"], set()).add(doc["push_token"])
        return {pass_id: sorted(tokens) for pass_id, tokens in found.items()}

    async def of_device(self, device: str, pass_type: str) -> list[Document]:
        cursor = self._registrations.find({"device": device, "pass_type": pass_type})
        return [doc async for doc in cursor]

    async def kept_tag(self, device: str, pass_type: str, tag_id: str) -> str | None:
        """The tag kept under `tag_id` for this device and pass type, if it still is."""
        doc = await self._tags.find_one({"_id": _tags_id(device, pass_type)}, {"tags": 1})
        kept = [] if doc is None else doc.get("tags", [])
        return next((str(entry["tag"]) for entry in kept if entry.get("id") == tag_id), None)

    async def keep_tag(
        self, device: str, pass_type: str, tag_id: str, tag: str, expires_at: datetime
    ) -> None:
        """Keep a tag handed to a device, with the `KEPT_TAGS - 1` handed out before it."""
        key = _tags_id(device, pass_type)
        # The same versions again (no update since, or a lost answer): only the expiry moves.
        again = await self._tags.update_one(
            {"_id": key, "tags.id": tag_id}, {"$set": {"expires_at": expires_at}}
        )
        if again.matched_count:
            return
        # Two listings at once may both push it: a duplicate costs a slot, nothing else.
        entry = {"id": tag_id, "tag": tag}
        await self._tags.update_one(
            {"_id": key},
            {
                "$push": {"tags": {"$each": [entry], "$slice": -KEPT_TAGS}},
                "$set": {"expires_at": expires_at},
            },
            upsert=True,
        )

    async def using_push_token(
        self, pass_type: str, push_token: str, older_than: datetime | None
    ) -> tuple[Document, list[Document]]:
        """The registrations that use a dead token (not those renewed since it died), and the
        condition that says so, for `unregister` to repeat."""
        still: Document = {"pass_type": pass_type, "push_token": push_token}
        if older_than is not None:
            still["updated_at"] = {"$lt": older_than}
        cursor = self._registrations.find(still, {"pass_id": 1, "device": 1})
        return still, [doc async for doc in cursor]


class DeviceLogs:
    def __init__(self, db: Database):
        self._logs = db["device_logs"]
        # One counter per day: its entries are reserved before they are written, so concurrent
        # posts share the day's allowance instead of each reading it as free.
        self._days = db["device_log_days"]

    async def ensure_indexes(self) -> None:
        await self._logs.create_index(
            "received_at", expireAfterSeconds=int(DEVICE_LOG_TTL.total_seconds())
        )
        await self._logs.create_index("day")
        await self._days.create_index("expires_at", expireAfterSeconds=0)

    async def add(self, messages: list[str], at: datetime, address: str | None = None) -> int:
        """Store what fits in today's allowance (DEVICE_LOGS_PER_DAY, however many posts come
        at once) and in the address's share of it (DEVICE_LOGS_PER_ADDRESS_PER_DAY; its
        counter is named by a digest of the address, never the address); returns how many were
        stored."""
        day = at.date().isoformat()
        expires_at = at + DEVICE_LOG_TTL
        wanted = len(messages)
        if address:
            digest = hashlib.sha256(address.encode()).hexdigest()[:32]
            share = DEVICE_LOGS_PER_ADDRESS_PER_DAY
            taken = await self._reserve(f"{day}:address:{digest}", wanted, expires_at, share)
            wanted = max(0, min(wanted, share - taken))
            if not wanted:
                return 0
        before = await self._reserve(day, wanted, expires_at, DEVICE_LOGS_PER_DAY)
        room = messages[: max(0, min(wanted, DEVICE_LOGS_PER_DAY - before))]
        if room:
            await self._logs.insert_many(
                [
                    {"_id": new_id("device_log"), "message": text, "received_at": at, "day": day}
                    for text in room
                ]
            )
        return len(room)

    async def _reserve(self, day: str, count: int, expires_at: datetime, limit: int) -> int:
        """Add `count` to the day's counter; what it held before. The counter is made first,
        on its own: concurrent upserts that also count race on its creation (one may find
        nothing to answer), while an increment of a counter that exists never does."""
        with contextlib.suppress(DuplicateKeyError):  # made by a concurrent post meanwhile
            await self._days.update_one(
                {"_id": day},
                {"$setOnInsert": {"count": 0, "expires_at": expires_at}},
                upsert=True,
            )
        counted = await self._days.find_one_and_update(
            {"_id": day}, {"$inc": {"count": count}}, return_document=ReturnDocument.AFTER
        )
        if counted is None:  # removed by its TTL between the two (a day later): nothing stored
            return limit
        return int(counted["count"]) - count


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
