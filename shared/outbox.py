"""The outbox: the one way a service puts events on the stream without losing one.

A service writes an event document to its own outbox collection: in the transaction of the
write the event reports (the record and its event commit together or not at all), or alone
when there is no write to pair it with. A relay, which every replica of the service runs,
publishes the documents to JetStream and deletes each once its publish was acknowledged, so a
crash anywhere loses no committed event. Each owner has its own collections (`outbox` and
`outbox_dead_letters` for the issuer, `events_outbox`, `api_outbox`): a service writes only
its own.

The relay is a user of the leased poller (shared/poller.py). A claim leases a batch of up to
`BATCH_SIZE` documents in `_id` order (`lease_owner`, `lease_until`, renewed while its publishes
run), so N replicas publish each event once in the steady state; a relay that dies mid-batch
keeps its lease until it expires, then another replica publishes the batch again, which
JetStream's duplicate window (the event id is the Nats-Msg-Id) and the consumers' unique `_id`
absorb. It claims at start (events left
by a crash), when a write wakes it, and every `poll_seconds` as the safety net.

A transaction that commits many events (a job's chunk, a batch of passes) may write them as
one document (`outbox_batch_documents`: `messages`, each with its own id, subject and
payload): one insert and one delete for them all instead of one each, the cost that mattered
most in bulk work on the development store (docs/performance.md). Its messages are published
together; if only some of them could be, the document is split into one document per message
left, which then go the way of any document.

Each document of a batch has its own outcome, so one event that cannot be published never holds
back the others (an event over NATS's max_payload once jammed every tenant's events). One that
can never be published is set aside in the dead letters at once; one that keeps failing while
the rest of its batch goes out waits longer between tries and is set aside after
`MAX_ISOLATED_FAILURES`. When a whole batch fails (NATS down) nothing is counted against the
events: the batch is tried again at the next tick (docs/operations.md#outbox-dead-letters).
"""

import asyncio
import contextlib
import itertools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from faststream.nats import NatsBroker
from nats.errors import (
    ConnectionClosedError,
    ConnectionReconnectingError,
    MaxPayloadError,
    OutboundBufferLimitError,
    StaleConnectionError,
)
from nats.js.errors import APIError
from pymongo import ASCENDING
from pymongo.asynchronous.client_session import AsyncClientSession
from pymongo.errors import DuplicateKeyError, PyMongoError

from shared.clock import Clock, SystemClock
from shared.messages import LiveUpdate, PassEventMessage, stream_of
from shared.metrics import OUTBOX_SET_ASIDE, Refresh, outbox_dead_letters, outbox_pending
from shared.mongo import Database, Document, is_write_conflict, origin
from shared.poller import Batch, Lease, Poller, replica_name

log = logging.getLogger(__name__)

T = TypeVar("T")
OutboxMessage = PassEventMessage | LiveUpdate

BATCH_SIZE = 100
# Payload bytes one batch document holds at most (MongoDB documents hold 16 MiB).
BATCH_DOCUMENT_BYTES = 4 * 1024 * 1024
# Publishes a relay has in flight at most (a claim of batch documents holds many events).
MAX_PUBLISHES_IN_FLIGHT = 500
# Longer than any batch of a live relay takes (its publishes run at once, each bounded by
# PUBLISH_TIMEOUT_SECONDS): its expiry is the only takeover, and it delays the events of a
# relay that died mid-batch by at most this long.
LEASE_SECONDS = 15.0
PUBLISH_TIMEOUT_SECONDS = 5.0
# The safety-net poll of a relay no setting configures (a write wakes it anyway).
POLL_SECONDS = 1.0
# How long published events wait to be deleted together with those of other commits.
DELETE_GATHER_SECONDS = 0.1
STOP_GRACE_SECONDS = 5.0
# Failures of one event while other events of its batches were published, before it is set
# aside; with the backoff below that is about four minutes of trying.
MAX_ISOLATED_FAILURES = 8
MAX_RETRY_DELAY = timedelta(minutes=2)
# Transactions that lost a write conflict to a concurrent one are run again this many times.
TRANSACTION_ATTEMPTS = 5
_LEASE_FIELDS = ("lease_owner", "lease_until")


def _nothing() -> None:
    pass


def _free(now: datetime) -> Document:
    """Not waiting for a retry after a failed publish, and free of a live lease."""
    return {"retry_at": {"$not": {"$gt": now}}, "lease_until": {"$not": {"$gte": now}}}


def outbox_document(message: OutboxMessage, at: datetime) -> Document:
    """The outbox document that publishes `message` (written by `Outbox.add`, or by an owner's
    unit of work with its other writes)."""
    return _document(message.id, message.subject, message.model_dump_json().encode(), at)


def _document(event_id: str, subject: str, payload: bytes, at: datetime) -> Document:
    return {"_id": event_id, "subject": subject, "payload": payload, "created_at": at}


def outbox_batch_documents(messages: Sequence[OutboxMessage], at: datetime) -> list[Document]:
    """The outbox documents of many messages committed together: one per message for one,
    else documents of up to BATCH_DOCUMENT_BYTES of payload each, holding them in order
    (`messages`), each document's `_id` its first message's id."""
    documents: list[Document] = []
    group: list[Document] = []
    size = 0
    for message in messages:
        payload = message.model_dump_json().encode()
        if group and size + len(payload) > BATCH_DOCUMENT_BYTES:
            documents.append(_grouped(group, at))
            group, size = [], 0
        group.append({"_id": message.id, "subject": message.subject, "payload": payload})
        size += len(payload)
    if group:
        documents.append(_grouped(group, at))
    return documents


def _grouped(messages: list[Document], at: datetime) -> Document:
    if len(messages) == 1:
        only = messages[0]
        return _document(only["_id"], only["subject"], only["payload"], at)
    return {"_id": messages[0]["_id"], "messages": messages, "created_at": at}


def outbox_message_count(document: Document) -> int:
    """The events an outbox document holds."""
    messages = document.get("messages")
    return len(messages) if isinstance(messages, list) else 1


class Unpublishable(Exception):
    """An outbox document that no retry can publish (malformed, or too large for NATS)."""


class PartlyPublished(Exception):
    """Some messages of a batch document were published, these were not."""

    def __init__(self, unpublished: list[Document], first_error: BaseException):
        super().__init__(_describe(first_error))
        self.unpublished = unpublished


class Outbox:
    """One owner's outbox: the collection `name` and `<name>_dead_letters`. Writes wake the
    owner's relay (`wake_on_write`); a write inside a transaction wakes it after the commit."""

    def __init__(self, db: Database, owner: str, name: str):
        self.owner = owner
        self._client = db.client
        self.documents = db[name]
        self.dead_letters = db[f"{name}_dead_letters"]
        self._wake: Callable[[], None] = _nothing

    def wake_on_write(self, wake: Callable[[], None]) -> None:
        self._wake = wake

    async def add(
        self, message: OutboxMessage, at: datetime, session: AsyncClientSession | None = None
    ) -> None:
        """Write a message to publish; inside `session`'s transaction when given. The relay is
        woken after the commit by `transaction()`; an owner with transactions of its own (the
        issuer's commands) wakes it itself (`OutboxRelay.notify`)."""
        await self._insert(outbox_document(message, at), session)

    async def insert(
        self,
        event_id: str,
        subject: str,
        payload: bytes,
        at: datetime,
        session: AsyncClientSession | None = None,
    ) -> None:
        """`add` of a payload as it is (what a malformed or oversized message would be)."""
        await self._insert(_document(event_id, subject, payload, at), session)

    async def _insert(self, document: Document, session: AsyncClientSession | None) -> None:
        await self.documents.insert_one(document, session=session)
        if session is None:
            self._wake()

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncClientSession]:
        """A transaction for a write and its events; the relay is woken once it committed."""
        async with self._client.start_session() as session, await session.start_transaction():
            yield session
        self._wake()

    async def in_transaction(self, write: Callable[[AsyncClientSession], Awaitable[T]]) -> T:
        """Run `write` (the owner's write and its `add`s) in one transaction, again from the
        start when it lost a write conflict to a concurrent transaction. Any other error,
        a duplicate key included, is the caller's."""
        for attempt in itertools.count(1):
            try:
                async with self.transaction() as session:
                    return await write(session)
            except PyMongoError as exc:
                if attempt >= TRANSACTION_ATTEMPTS or not is_write_conflict(exc):
                    raise
        raise AssertionError("unreachable")

    async def due(self, now: datetime, limit: int) -> list[str]:
        """The ids of the next documents a claim may take, in `_id` order."""
        cursor = self.documents.find(_free(now), {"_id": 1}).sort("_id", ASCENDING).limit(limit)
        return [doc["_id"] async for doc in cursor]

    async def claim(
        self, now: datetime, lease_until: datetime, token: str, limit: int
    ) -> list[Document]:
        """Lease up to `limit` due documents under `token`, in `_id` order. The update repeats
        the listing's condition, so of two claims listing the same documents each document
        goes to one; the documents whose update matched are read back by the token."""
        ids = await self.due(now, limit)
        if not ids:
            return []
        await self.documents.update_many(
            {"_id": {"$in": ids}, **_free(now)},
            {"$set": {"lease_owner": token, "lease_until": lease_until}},
        )
        cursor = self.documents.find({"_id": {"$in": ids}, "lease_owner": token})
        return [doc async for doc in cursor.sort("_id", ASCENDING)]

    async def done(self, event_ids: list[str], token: str) -> None:
        """Delete published documents, only under the claim's token."""
        await self.documents.delete_many({"_id": {"$in": event_ids}, "lease_owner": token})

    async def hold(self, event_ids: list[str], token: str, until: datetime) -> None:
        """Keep a batch none of which could be published from every claim until `until`."""
        await self.documents.update_many(
            {"_id": {"$in": event_ids}, "lease_owner": token}, {"$set": {"lease_until": until}}
        )

    async def retry_later(
        self, event_id: str, token: str, attempts: int, retry_at: datetime, error: str
    ) -> None:
        """Leave a document whose publish failed out of the next claims until `retry_at`."""
        await self.documents.update_one(
            {"_id": event_id, "lease_owner": token},
            {
                "$set": {"attempts": attempts, "retry_at": retry_at, "last_error": error},
                "$unset": dict.fromkeys(_LEASE_FIELDS, ""),
            },
        )

    async def split(self, doc: Document, unpublished: list[Document], token: str) -> None:
        """Replace a batch document, still leased under `token`, by one free document per
        message not yet published (in one transaction): those then go the way of any document
        (retried, set aside), and the published ones are not sent again."""
        at = doc.get("created_at") or datetime.now(UTC)

        async def write(session: AsyncClientSession) -> None:
            taken = await self.documents.delete_one(
                {"_id": doc["_id"], "lease_owner": token}, session=session
            )
            if taken.deleted_count == 1:  # else another relay holds it now: it publishes all
                singles = [_document(m["_id"], m["subject"], m["payload"], at) for m in unpublished]
                await self.documents.insert_many(singles, session=session)

        await self.in_transaction(write)

    async def set_aside(self, doc: Document, reason: str, at: datetime, token: str) -> None:
        """Move a document that can never be published to the dead letters.

        Copied before it is deleted: a crash in between leaves it in both places (the next
        claim sets it aside again, and the copy's unique `_id` absorbs that), never in neither.
        """
        kept = {key: value for key, value in doc.items() if key not in _LEASE_FIELDS}
        with contextlib.suppress(DuplicateKeyError):
            await self.dead_letters.insert_one({**kept, "reason": reason, "set_aside_at": at})
        await self.documents.delete_one({"_id": doc["_id"], "lease_owner": token})

    async def size(self) -> int:
        """Documents committed but not yet published (an event, or the events of one bulk
        transaction)."""
        return await self.documents.count_documents({})

    async def dead_letter_count(self) -> int:
        return await self.dead_letters.count_documents({})

    def gauges(self) -> list[Refresh]:
        """The scrape-time gauges of this outbox: its size and its dead letters."""
        return [
            outbox_pending(self.owner, self.size),
            outbox_dead_letters(self.owner, self.dead_letter_count),
        ]


class OutboxRelay:
    """Publishes an outbox's documents to JetStream on the leased poller: one batch at a time
    per process, in `_id` order, each to its subject's stream (`shared.messages.stream_of`)."""

    def __init__(
        self,
        outbox: Outbox,
        broker: NatsBroker,
        *,
        poll_seconds: float = POLL_SECONDS,
        lease_seconds: float = LEASE_SECONDS,
        clock: Clock | None = None,
        owner: str | None = None,
    ):
        self._outbox = outbox
        self._broker = broker
        self._poll = timedelta(seconds=poll_seconds)
        self._lease_for = timedelta(seconds=lease_seconds)
        self._clock = clock or SystemClock()
        self._owner = owner or replica_name()
        self._drains = itertools.count(1)
        # Documents written leased to this relay by a transaction of this process, published
        # right after its commit (`publish_committed`), and deleted together.
        self._committed_token = f"{self._owner}/committed"
        self._to_delete: list[str] = []
        self._deleter: asyncio.Task[None] | None = None
        self._publishing: set[asyncio.Task[None]] = set()
        self._publishes = asyncio.Semaphore(MAX_PUBLISHES_IN_FLIGHT)
        # One batch at a time: within a process, events reach the stream in `_id` order.
        self._poller: Poller[list[Document]] = Poller(
            f"{outbox.owner}-outbox-relay",
            self._claim,
            self._work,
            concurrency=1,
            poll_seconds=poll_seconds,
            owner=self._owner,
        )
        outbox.wake_on_write(self.notify)

    def notify(self) -> None:
        """Something was committed: claim now instead of at the next poll."""
        self._poller.wake()

    def start(self) -> None:
        self._poller.start()

    def committed_lease(self) -> Document:
        """The lease a transaction gives the outbox documents it writes when this process
        publishes them itself once it committed (`publish_committed`): no claim takes them
        meanwhile, and if this process dies first, the lease runs out and any replica's claim
        publishes them (at least once, as ever)."""
        return {
            "lease_owner": self._committed_token,
            "lease_until": self._clock.now() + self._lease_for,
        }

    def publish_committed(self, docs: list[Document]) -> None:
        """Publish documents written under `committed_lease` by a transaction that committed,
        now, without waiting for a claim: the event is on the stream one publish after the
        commit, and the three claim commands (list, lease, read back) are saved. Published
        documents are deleted together with those of concurrent commits; one whose publish
        failed is released to the relay's claims (which retry it, or set it aside)."""
        if not docs:
            return
        task = asyncio.create_task(self._publish_committed(docs))
        self._publishing.add(task)
        task.add_done_callback(self._publishing.discard)

    async def _publish_committed(self, docs: list[Document]) -> None:
        # The lease is not renewed here, unlike a claimed batch's: this is the fast path, and
        # its lease running out is the fallback. While NATS is slow (a stream's leader lost),
        # commits queue for publish slots behind publishes that time out; renewed, their
        # events stayed leased to that queue for minutes, where the relay takes them over
        # once the lease ends (tests/faults/test_nats_cluster.py caught it).
        outcomes = await asyncio.gather(
            *(self._publish(doc) for doc in docs), return_exceptions=True
        )
        published = [doc["_id"] for doc, error in zip(docs, outcomes, strict=True) if not error]
        failed = [doc["_id"] for doc, error in zip(docs, outcomes, strict=True) if error]
        for doc, outcome in zip(docs, outcomes, strict=True):
            if isinstance(outcome, PartlyPublished):
                failed.remove(doc["_id"])
                await self._split(doc, outcome, self._committed_token)
        if published:
            self._to_delete.extend(published)
            if self._deleter is None or self._deleter.done():
                self._deleter = asyncio.create_task(self._delete_published())
        if failed:
            try:
                await self._outbox.hold(failed, self._committed_token, self._clock.now())
            except Exception:
                log.exception("%s outbox: releasing unpublished events failed", self._outbox.owner)
            self.notify()

    async def _delete_published(self) -> None:
        """Delete what was published, in one command for all the commits that published
        meanwhile; a failure leaves them to run out their lease and be published again (the
        stream's duplicate window and the consumers' unique ids absorb that)."""
        with origin("background"):
            while self._to_delete:
                # Gathers the commits of the next moment: one delete for many events.
                await asyncio.sleep(DELETE_GATHER_SECONDS)
                ids, self._to_delete = self._to_delete, []
                try:
                    await self._outbox.done(ids, self._committed_token)
                except Exception:
                    log.exception("%s outbox: deleting published events failed", self._outbox.owner)

    async def stop(self, grace_seconds: float = STOP_GRACE_SECONDS) -> None:
        """Claim nothing more; a batch in flight gets `grace_seconds` to finish, else keeps
        its lease and another replica publishes it once the lease expires."""
        pending = [*self._publishing, *([self._deleter] if self._deleter else [])]
        if pending:
            await asyncio.wait(pending, timeout=grace_seconds)
        await self._poller.stop(grace_seconds)

    async def drain(self) -> int:
        """Claim and publish batches until none is left, here and now (without the loop);
        returns how many events were sent. Raises the first error when no event of a batch
        could be published (NATS or the stream unavailable): that batch waits a tick."""
        sent = 0
        while True:
            token = f"{self._owner}/drain-{next(self._drains)}"
            if not (batch := await self._take(token)):
                return sent
            sent += await self._publish_batch(batch, token)

    async def _take(self, token: str, batches: int = 1) -> list[Document]:
        now = self._clock.now()
        return await self._outbox.claim(now, now + self._lease_for, token, batches * BATCH_SIZE)

    async def _claim(self, batch: Batch[list[Document]]) -> list[list[Document]]:
        if batch.size <= 0:
            return []
        docs = await self._take(batch.token, batch.size)
        return [docs[n : n + BATCH_SIZE] for n in range(0, len(docs), BATCH_SIZE)]

    async def _work(self, docs: list[Document], lease: Lease) -> None:
        try:
            await self._publish_batch(docs, lease.token)
        except Exception:
            # NATS or MongoDB unavailable: the batch is held until the next tick, not retried
            # in a tight loop.
            log.exception("%s outbox relay failed; will retry", self._outbox.owner)

    async def _publish_batch(self, docs: list[Document], token: str) -> int:
        """Publish a batch leased under `token` concurrently (each publish still waits for
        JetStream's ack) and delete each event once its own ack arrived; how many were sent."""
        async with self._lease_kept([doc["_id"] for doc in docs], token):
            outcomes = await asyncio.gather(
                *(self._publish(doc) for doc in docs), return_exceptions=True
            )
        published = [doc["_id"] for doc, error in zip(docs, outcomes, strict=True) if not error]
        failed = [(doc, e) for doc, e in zip(docs, outcomes, strict=True) if e is not None]
        if published:
            await self._outbox.done(published, token)
        partly = [(doc, e) for doc, e in failed if isinstance(e, PartlyPublished)]
        for doc, split in partly:
            await self._split(doc, split, token)
        failed = [(doc, e) for doc, e in failed if not isinstance(e, PartlyPublished)]
        for doc, error in failed:
            if isinstance(error, Unpublishable):
                await self._set_aside(doc, str(error), token)
        transient = [(doc, e) for doc, e in failed if not isinstance(e, Unpublishable)]
        # A failure is the event's own only if its stream took others of the batch: when only
        # one stream is down (a cluster lost its quorum for it), the events bound for it are
        # held a tick like those of a NATS outage, not counted towards being set aside.
        working = {stream for doc in docs if doc["_id"] in published for stream in _streams(doc)}
        working |= {stream for doc, _ in partly for stream in _streams(doc)}
        isolated: list[tuple[Document, BaseException]] = []
        down: list[tuple[Document, BaseException]] = []
        for doc, error in transient:
            blamed = _streams(doc) <= working and not _server_side(error)
            (isolated if blamed else down).append((doc, error))
        if down:
            held = [doc["_id"] for doc, _ in down]
            await self._outbox.hold(held, token, self._clock.now() + self._poll)
            if not published and not partly:
                raise down[0][1]
        for doc, error in isolated:
            await self._retry_later(doc, error, token)
        return sum(outbox_message_count(doc) for doc in docs if doc["_id"] in published)

    @asynccontextmanager
    async def _lease_kept(self, ids: list[str], token: str) -> AsyncIterator[None]:
        """Renew the batch's lease every third of it while its publishes run: a claim of
        batch documents after an outage holds thousands of events, whose publishes outlast
        one lease, and another replica would claim and publish them again meanwhile."""

        async def renew() -> None:
            every = self._lease_for.total_seconds() / 3
            while True:
                await asyncio.sleep(every)
                try:
                    await self._outbox.hold(ids, token, self._clock.now() + self._lease_for)
                except PyMongoError as exc:
                    log.warning("%s outbox: lease not renewed: %s", self._outbox.owner, exc)

        renewing = asyncio.create_task(renew(), name="outbox-lease-renewal")
        try:
            yield
        finally:
            renewing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewing

    async def _split(self, doc: Document, error: PartlyPublished, token: str) -> None:
        log.warning(
            "outbox batch %s: %d of its events not published (%s); split to be retried alone",
            doc["_id"],
            len(error.unpublished),
            error,
        )
        try:
            await self._outbox.split(doc, error.unpublished, token)
        except Exception:
            # Left leased: once the lease ends a claim publishes the whole batch again (the
            # published ones are deduplicated by their ids).
            log.exception("%s outbox: splitting batch %s failed", self._outbox.owner, doc["_id"])
        self.notify()

    async def _publish(self, doc: Document) -> None:
        if "messages" in doc:
            await self._publish_messages(doc)
            return
        await self._publish_message(doc)

    async def _publish_messages(self, doc: Document) -> None:
        """Every message of a batch document, at once; PartlyPublished with those left when
        some were published, else (none was) the error as for one message, a transient one
        first (the batch is tried again whole)."""
        messages = doc["messages"]
        if not isinstance(messages, list) or not messages:
            raise Unpublishable("malformed outbox document (messages)")
        outcomes = await asyncio.gather(
            *(self._publish_message(message) for message in messages), return_exceptions=True
        )
        failed = [(m, e) for m, e in zip(messages, outcomes, strict=True) if e is not None]
        if not failed:
            return
        if len(failed) < len(messages):
            raise PartlyPublished([m for m, _ in failed], failed[0][1])
        transient = [e for _, e in failed if not isinstance(e, Unpublishable)]
        raise (transient or [e for _, e in failed])[0]

    async def _publish_message(self, doc: Document) -> None:
        try:
            subject = str(doc["subject"])
            payload = bytes(doc["payload"])
        except (KeyError, TypeError, ValueError) as exc:
            raise Unpublishable(f"malformed outbox document ({type(exc).__name__})") from exc
        try:
            async with self._publishes:
                await self._broker.publish(
                    payload,
                    subject,
                    stream=stream_of(subject),
                    headers={"Nats-Msg-Id": str(doc["_id"])},
                    timeout=PUBLISH_TIMEOUT_SECONDS,
                )
        except MaxPayloadError as exc:
            raise Unpublishable(
                f"{len(payload)} bytes, over the {self._max_payload()} bytes NATS carries"
            ) from exc

    def _max_payload(self) -> int | str:
        with contextlib.suppress(Exception):
            return int(self._broker.connection.max_payload)
        return "maximum"

    async def _set_aside(self, doc: Document, reason: str, token: str) -> None:
        await self._outbox.set_aside(doc, reason, self._clock.now(), token)
        OUTBOX_SET_ASIDE.labels(self._outbox.owner).inc()
        # The id and the reason only: the payload holds holder data.
        log.error("outbox event %s set aside, it cannot be published: %s", doc["_id"], reason)

    async def _retry_later(self, doc: Document, error: BaseException, token: str) -> None:
        """An event that failed while others of its batch were published: it may be the
        problem, so it waits longer each time, and is set aside when it keeps failing."""
        attempts = int(doc.get("attempts") or 0) + 1
        if attempts >= MAX_ISOLATED_FAILURES:
            await self._set_aside(doc, f"failed {attempts} times: {_describe(error)}", token)
            return
        delay = min(timedelta(seconds=2**attempts), MAX_RETRY_DELAY)
        log.warning("outbox event %s failed (%s); retry in %s", doc["_id"], _describe(error), delay)
        await self._outbox.retry_later(
            doc["_id"], token, attempts, self._clock.now() + delay, _describe(error)
        )


def _streams(doc: Document) -> frozenset[str]:
    """The streams a document's events go to (a batch document's may go to both)."""
    messages = doc.get("messages")
    if isinstance(messages, list):
        return frozenset(stream_of(str(m.get("subject", ""))) for m in messages)
    return frozenset({stream_of(str(doc.get("subject", "")))})


# JetStream's "insufficient resources" (its store out of room).
_RESOURCES_ERR_CODE = 10047


def _server_side(error: BaseException) -> bool:
    """A publish that failed because of the server's state, whatever the event: no answer in
    time (under load some publishes time out while others are acked), the connection, or the
    stream refusing (503: full, no leader; its store out of room). Such an event is held a
    tick, never counted towards being set aside."""
    if isinstance(
        error,
        TimeoutError  # nats' own TimeoutError is one too
        | ConnectionClosedError
        | ConnectionReconnectingError
        | OutboundBufferLimitError
        | StaleConnectionError,
    ):
        return True
    return isinstance(error, APIError) and (
        error.code == 503 or error.err_code == _RESOURCES_ERR_CODE
    )


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"[:500]
