"""The shared outbox and its relay on the leased poller, against a real MongoDB-wire store and a
real nats-server: publishes are counted on a core NATS subscription, which sees every publish
(JetStream's duplicate window hides a second copy only from the stream). Two relays on one
collection publish each event once; a relay that died mid-batch holds its lease until it
expires, then another takes the batch over; writes wake the relay, a transaction's only once
committed. (The dead letters: tests/issuer/test_outbox.py.)"""

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

import nats
import pytest
from faststream.nats import NatsBroker
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.api import DiscardPolicy

from shared.ids import new_id
from shared.messages import EVENTS_STREAM, LIVE_UPDATES_SUBJECT_PREFIX, PassEventMessage
from shared.mongo import Database, Document
from shared.nats import create_broker, ensure_events_stream, ensure_streams
from shared.outbox import (
    LEASE_SECONDS,
    Outbox,
    OutboxRelay,
    outbox_batch_documents,
    outbox_document,
)
from shared.pass_events import pass_event
from tests.support.database import commands_sent
from tests.support.records import pass_record

SUBJECT = "tessera.events.pass.created"
# Claims the other relay makes while committed events wait for their process to publish them.
CLAIMS = 10


class MovableClock:
    def __init__(self) -> None:
        self.moment = datetime.now(UTC)

    def now(self) -> datetime:
        return self.moment


@dataclass
class Published:
    """Every publish on the events subjects, by Nats-Msg-Id."""

    counts: Counter[str]

    def of(self, ids: list[str]) -> list[int]:
        return [self.counts[event_id] for event_id in ids]


@pytest.fixture
async def published(nats_url: str) -> AsyncIterator[Published]:
    counts: Counter[str] = Counter()

    async def count(msg: Msg) -> None:
        counts[(msg.headers or {}).get("Nats-Msg-Id", "")] += 1

    client: Client = await nats.connect(nats_url)
    await client.subscribe("tessera.events.>", cb=count)
    await client.flush()
    try:
        yield Published(counts)
    finally:
        await client.drain()


@pytest.fixture
async def brokers(nats_url: str) -> AsyncIterator[list[NatsBroker]]:
    """Two connections, as two replicas have."""
    connected = [create_broker(nats_url) for _ in range(2)]
    for broker in connected:
        await broker.connect()
    await ensure_events_stream(connected[0])
    try:
        yield connected
    finally:
        for broker in connected:
            await broker.stop()


async def _add(outbox: Outbox, count: int) -> list[str]:
    ids = [new_id("pass_event") for _ in range(count)]
    now = datetime.now(UTC)
    for event_id in ids:
        await outbox.insert(event_id, SUBJECT, b"{}", now)
    return ids


async def _until(check: Callable[[], Awaitable[bool]]) -> None:
    """Poll `check` until it holds, for at most 10 s."""
    async with asyncio.timeout(10):
        while True:
            if await check():
                return
            await asyncio.sleep(0.02)


async def _empty(outbox: Outbox) -> bool:
    return await outbox.size() == 0


async def test_two_relays_on_one_outbox_publish_each_event_once(
    db: Database, brokers: list[NatsBroker], published: Published
) -> None:
    """Two replicas' relays, each on its own connection, racing on every claim: each document
    is leased by one of them, so each event is published once, not once per replica."""
    outboxes = [Outbox(db, "test", "outbox") for _ in brokers]
    relays = [
        OutboxRelay(outbox, broker, poll_seconds=0.01, owner=f"replica-{n}")
        for n, (outbox, broker) in enumerate(zip(outboxes, brokers, strict=True))
    ]
    for relay in relays:
        relay.start()
    try:
        ids: list[str] = []
        for n in range(10):  # written while both relays claim, each write waking one of them
            ids += await _add(outboxes[n % 2], 30)
        await _until(lambda: _empty(outboxes[0]))
    finally:
        for relay in relays:
            await relay.stop()
    assert published.of(ids) == [1] * len(ids)


async def test_a_batch_of_a_relay_that_died_is_taken_over_once_its_lease_expires(
    db: Database, brokers: list[NatsBroker], published: Published
) -> None:
    outbox = Outbox(db, "test", "outbox")
    ids = await _add(outbox, 5)
    clock = MovableClock()
    lease = timedelta(seconds=LEASE_SECONDS)
    # What a relay's claim leaves when its process dies before publishing the batch.
    dead = "dead-replica/1"
    assert len(await outbox.claim(clock.now(), clock.now() + lease, dead, 100)) == 5
    relay = OutboxRelay(outbox, brokers[0], poll_seconds=3600, clock=clock)
    assert await relay.drain() == 0  # the dead relay's lease is live: nothing to take
    assert published.of(ids) == [0] * 5
    clock.moment += lease + timedelta(seconds=1)
    relay.start()  # claims at once
    try:
        await _until(lambda: _empty(outbox))
    finally:
        await relay.stop()
    assert published.of(ids) == [1] * 5


async def test_the_writes_of_a_relay_whose_lease_was_taken_over_change_nothing(
    db: Database, brokers: list[NatsBroker]
) -> None:
    outbox = Outbox(db, "test", "outbox")
    ids = await _add(outbox, 3)
    now = datetime.now(UTC)
    await outbox.claim(now - timedelta(minutes=1), now - timedelta(seconds=1), "slow/1", 100)
    assert len(await outbox.claim(now, now + timedelta(minutes=1), "fast/1", 100)) == 3
    # The first relay comes back from a long pause and records its outcomes: all refused.
    await outbox.done(ids, "slow/1")
    await outbox.retry_later(ids[0], "slow/1", 1, now, "late")
    assert await outbox.size() == 3
    assert await outbox.documents.count_documents({"lease_owner": "fast/1"}) == 3
    assert await outbox.documents.count_documents({"attempts": {"$exists": True}}) == 0


async def test_a_write_wakes_the_relay_and_a_transaction_only_once_committed(
    db: Database, brokers: list[NatsBroker], published: Published
) -> None:
    """The poll (an hour here) is only the safety net: a write is published at once, the
    events of a transaction once it committed, and those of an aborted one never exist."""
    outbox = Outbox(db, "test", "outbox")
    relay = OutboxRelay(outbox, brokers[0], poll_seconds=3600)
    relay.start()
    record = pass_record(_id=new_id("pass"))
    try:
        alone = pass_event(record, "url_viewed", {}, datetime.now(UTC))
        await outbox.add(alone, alone.created_at)
        await _until(lambda: _empty(outbox))
        committed = pass_event(record, "installed", {}, datetime.now(UTC))
        aborted = pass_event(record, "removed", {}, datetime.now(UTC))
        async with outbox.transaction() as session:
            await outbox.add(committed, committed.created_at, session)
        with pytest.raises(RuntimeError):
            await _write_then_fail(outbox, aborted)
        await _until(lambda: _empty(outbox))
    finally:
        await relay.stop()
    assert published.of([alone.id, committed.id, aborted.id]) == [1, 1, 0]


async def _write_then_fail(outbox: Outbox, event: PassEventMessage) -> None:
    async with outbox.transaction() as session:
        await outbox.add(event, event.created_at, session)
        raise RuntimeError("the owner's write failed")


async def test_a_batch_nothing_of_which_could_be_published_waits_for_the_next_tick(
    db: Database, nats_url: str
) -> None:
    """NATS down: no event is blamed, and the batch is held one poll interval, so the relay
    does not spin on it (nor does another replica's)."""
    outbox = Outbox(db, "test", "outbox")
    ids = await _add(outbox, 3)
    broker = create_broker(nats_url)
    await broker.connect()
    await broker.stop()
    clock = MovableClock()
    relay = OutboxRelay(outbox, broker, poll_seconds=30, clock=clock)
    with pytest.raises(Exception):  # noqa: B017, PT011  # whatever the closed client raises
        await relay.drain()
    assert await outbox.due(clock.now() + timedelta(seconds=29), 100) == []
    assert await outbox.due(clock.now() + timedelta(seconds=31), 100) == ids
    assert await outbox.documents.count_documents({"attempts": {"$exists": True}}) == 0


async def test_events_of_a_stream_that_is_down_are_held_not_blamed(
    db: Database, nats_url: str
) -> None:
    """One outbox feeds two streams. When only the events stream takes nothing (a cluster lost
    its quorum for it) while live updates publish, the events are held a tick as in a NATS
    outage: they were counted as failing on their own, and set aside after eight ticks."""
    outbox = Outbox(db, "test", "outbox")
    broker = create_broker(nats_url)
    await broker.connect()
    await ensure_streams(broker)
    js = broker.connection.jetstream()
    await js.delete_stream(EVENTS_STREAM)
    now = datetime.now(UTC)
    events = await _add(outbox, 2)
    live = [new_id("pass_event") for _ in range(2)]
    for event_id in live:
        await outbox.insert(event_id, f"{LIVE_UPDATES_SUBJECT_PREFIX}.pass.updated", b"{}", now)
    clock = MovableClock()
    relay = OutboxRelay(outbox, broker, poll_seconds=30, clock=clock)
    try:
        assert await relay.drain() == 2
    finally:
        await ensure_events_stream(broker)  # for the module's other tests
        await broker.stop()
    assert await outbox.documents.count_documents({"_id": {"$in": live}}) == 0
    assert await outbox.documents.count_documents({"attempts": {"$exists": True}}) == 0
    assert await outbox.due(clock.now() + timedelta(seconds=31), 100) == events


async def test_events_a_full_stream_refuses_are_held_not_blamed(
    db: Database, nats_url: str
) -> None:
    """A stream that takes some events of a batch and refuses the rest (full, its store out of
    room; as with publishes that time out under load) is in trouble, not those events: they
    were counted as failing on their own, and set aside after eight tries (four minutes)."""
    outbox = Outbox(db, "test", "outbox")
    broker = create_broker(nats_url)
    await broker.connect()
    await ensure_streams(broker)
    js = broker.connection.jetstream()
    info = await js.stream_info(EVENTS_STREAM)
    full = replace(info.config, max_msgs=info.state.messages + 1, discard=DiscardPolicy.NEW)
    await js.update_stream(full)
    events = await _add(outbox, 3)
    clock = MovableClock()
    relay = OutboxRelay(outbox, broker, poll_seconds=30, clock=clock)
    try:
        assert await relay.drain() == 1
    finally:
        await js.update_stream(info.config)  # for the module's other tests
        await broker.stop()
    assert await outbox.documents.count_documents({"attempts": {"$exists": True}}) == 0
    assert await outbox.due(clock.now() + timedelta(seconds=31), 100) == events[1:]


async def _commit_leased(outbox: Outbox, relay: OutboxRelay, count: int) -> list[Document]:
    """What a transaction of the owner writes for its own process to publish: `count` events
    under the relay's committed lease, committed."""
    now = datetime.now(UTC)
    record = pass_record(_id=new_id("pass"))
    docs = [
        {**outbox_document(pass_event(record, "created", {}, now), now), **relay.committed_lease()}
        for _ in range(count)
    ]
    async with outbox.transaction() as session:
        await outbox.documents.insert_many(docs, session=session)
    return docs


async def test_committed_events_are_published_by_their_process_once_and_deleted(
    db: Database, brokers: list[NatsBroker], published: Published
) -> None:
    """The fast path: the process that committed publishes its events itself; the other
    replica's relay, claiming all the while, takes none of them (they are leased), so each
    is published once; then they are deleted."""
    outboxes = [Outbox(db, "test", "outbox") for _ in brokers]
    mine, other = (
        OutboxRelay(outbox, broker, poll_seconds=0.01, owner=f"replica-{n}")
        for n, (outbox, broker) in enumerate(zip(outboxes, brokers, strict=True))
    )
    other.start()
    try:
        docs = await _commit_leased(outboxes[0], mine, 20)
        with commands_sent() as sent:
            # Each claim of the other relay lists the due documents (one find), and finds none.
            async def claimed_many_times() -> bool:
                return sent.count("find") >= CLAIMS

            await _until(claimed_many_times)
        assert published.of([doc["_id"] for doc in docs]) == [0] * 20
        mine.publish_committed(docs)
        await _until(lambda: _empty(outboxes[0]))
    finally:
        await mine.stop()
        await other.stop()
    assert published.of([doc["_id"] for doc in docs]) == [1] * 20


async def test_committed_events_of_a_process_that_died_are_published_once_the_lease_ends(
    db: Database, brokers: list[NatsBroker], published: Published
) -> None:
    outbox = Outbox(db, "test", "outbox")
    clock = MovableClock()
    died = OutboxRelay(outbox, brokers[0], clock=clock, owner="died")
    docs = await _commit_leased(outbox, died, 3)  # and never published: the process died
    relay = OutboxRelay(outbox, brokers[1], poll_seconds=3600, clock=clock, owner="alive")
    assert await relay.drain() == 0  # leased: not yet
    clock.moment += timedelta(seconds=LEASE_SECONDS + 1)
    assert await relay.drain() == 3
    assert published.of([doc["_id"] for doc in docs]) == [1] * 3


async def test_a_committed_event_that_cannot_be_published_is_left_to_the_relay(
    db: Database, brokers: list[NatsBroker]
) -> None:
    """No stream takes the subject: the publish fails, and the document is released to the
    relay's claims at once (which retry it and set it aside in the end), not kept leased."""
    outbox = Outbox(db, "test", "outbox")
    relay = OutboxRelay(outbox, brokers[0], poll_seconds=3600, owner="replica")
    docs = await _commit_leased(outbox, relay, 1)
    await outbox.documents.update_one({"_id": docs[0]["_id"]}, {"$set": {"subject": "nowhere.x"}})
    relay.publish_committed([{**docs[0], "subject": "nowhere.x"}])

    async def released() -> bool:
        return await outbox.due(datetime.now(UTC), 10) == [docs[0]["_id"]]

    try:
        await _until(released)
    finally:
        await relay.stop()


def _events(count: int) -> list[PassEventMessage]:
    now = datetime.now(UTC)
    return [pass_event(pass_record(_id=new_id("pass")), "created", {}, now) for _ in range(count)]


async def test_a_batch_document_publishes_each_of_its_events_once_then_goes(
    db: Database, brokers: list[NatsBroker], published: Published
) -> None:
    """The events of one bulk transaction in one document: a claim publishes each of them,
    with its own id, and deletes the one document."""
    outbox = Outbox(db, "test", "outbox")
    events = _events(30)
    [document] = outbox_batch_documents(events, datetime.now(UTC))
    assert len(document["messages"]) == 30
    await outbox.documents.insert_one(document)
    relay = OutboxRelay(outbox, brokers[0], poll_seconds=3600, owner="replica")
    assert await relay.drain() == 30
    assert published.of([event.id for event in events]) == [1] * 30
    assert await _empty(outbox)


async def test_a_batch_document_partly_published_is_split_and_the_rest_goes_alone(
    db: Database, brokers: list[NatsBroker], published: Published
) -> None:
    """One event of a committed batch cannot be published (no stream takes its subject): the
    others go out once, and the document is replaced by one free document for the one left,
    which the relay's claims then retry alone (and set aside in the end)."""
    outbox = Outbox(db, "test", "outbox")
    relay = OutboxRelay(outbox, brokers[0], poll_seconds=3600, owner="replica")
    events = _events(3)
    [document] = outbox_batch_documents(events, datetime.now(UTC))
    document |= relay.committed_lease()
    document["messages"][1]["subject"] = "nowhere.x"
    await outbox.documents.insert_one(document)
    relay.publish_committed([document])

    async def split() -> bool:
        return await outbox.due(datetime.now(UTC), 10) == [events[1].id]

    try:
        await _until(split)
    finally:
        await relay.stop()
    assert published.of([event.id for event in events]) == [1, 0, 1]
    [left] = await outbox.documents.find().to_list()
    assert left["subject"] == "nowhere.x"
    assert "messages" not in left


async def test_a_claimed_batch_document_partly_published_is_split_and_the_rest_held(
    db: Database, brokers: list[NatsBroker], published: Published
) -> None:
    """The same through a relay's claim (a batch left by a process that died): the events
    that could go out go once, the one left becomes a document of its own, and when nothing
    else of a claim can be published it is held for a poll and the drain says why."""
    outbox = Outbox(db, "test", "outbox")
    events = _events(3)
    [document] = outbox_batch_documents(events, datetime.now(UTC))
    document["messages"][2]["subject"] = "nowhere.x"
    await outbox.documents.insert_one(document)
    relay = OutboxRelay(outbox, brokers[0], poll_seconds=3600, owner="replica")
    with pytest.raises(Exception):  # noqa: B017, PT011  # what the broker raised for it
        await relay.drain()
    assert published.of([event.id for event in events]) == [1, 1, 0]
    [left] = await outbox.documents.find().to_list()
    assert left["_id"] == events[2].id
    assert "messages" not in left
    assert await outbox.due(datetime.now(UTC), 10) == []  # held until the next poll


def test_batch_documents_hold_at_most_their_share_of_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Many large events take several documents (a MongoDB document holds 16 MiB); one event
    alone is a plain document."""
    events = _events(5)
    size = len(events[0].model_dump_json())
    monkeypatch.setattr("shared.outbox.BATCH_DOCUMENT_BYTES", size * 2 + 1)
    documents = outbox_batch_documents(events, datetime.now(UTC))
    assert [len(doc.get("messages", [doc])) for doc in documents] == [2, 2, 1]
    assert "messages" not in documents[-1]
    assert [doc["_id"] for doc in documents] == [events[0].id, events[2].id, events[4].id]


async def test_a_batch_keeps_its_lease_while_its_publishes_run(
    db: Database, brokers: list[NatsBroker]
) -> None:
    """A claim after an outage holds thousands of events (batch documents), whose publishes
    outlast one lease: renewed, no other replica claims and publishes them again meanwhile."""
    outbox = Outbox(db, "test", "outbox")
    ids = await _add(outbox, 3)
    relay = OutboxRelay(outbox, brokers[0], poll_seconds=3600, lease_seconds=0.3)
    now = datetime.now(UTC)
    first_until = now + timedelta(seconds=0.3)
    assert len(await outbox.claim(now, first_until, "slow/1", 100)) == 3

    async def renewed() -> bool:
        docs = await outbox.documents.find({"lease_owner": "slow/1"}).to_list()
        return len(docs) == 3 and all(
            doc["lease_until"] > first_until + timedelta(seconds=0.2) for doc in docs
        )

    async with relay._lease_kept(ids, "slow/1"):
        await _until(renewed)
