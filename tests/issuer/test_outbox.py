"""The issuer's outbox relay (shared/outbox.py on the issuer's `outbox`) publishes what was
committed, once, even when asked to send it twice, each message to its stream: events to the
events stream, live updates to their work queue; what cannot be published is set aside."""

import asyncio
import secrets
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
from faststream.nats import NatsBroker
from nats.js.api import StreamInfo

from services.issuer.repository import IssuerRepository
from shared.ids import new_id
from shared.messages import (
    EVENTS_STREAM,
    LIVE_UPDATES_STREAM,
    LiveUpdate,
    PassEventMessage,
    live_update_adapter,
)
from shared.models import PassSnapshot
from shared.mongo import create_client
from shared.nats import create_broker, ensure_events_stream, ensure_streams
from shared.outbox import MAX_ISOLATED_FAILURES, MAX_RETRY_DELAY, OutboxRelay


async def _stream(relay_broker_url: str) -> StreamInfo:
    broker = create_broker(relay_broker_url)
    await broker.connect()
    try:
        return await broker.connection.jetstream().stream_info(EVENTS_STREAM)
    finally:
        await broker.stop()


async def test_drain_publishes_and_clears_and_dedupes_a_resend(
    mongo_url: str, nats_url: str
) -> None:
    client = create_client(mongo_url)
    db = client[f"t_{secrets.token_hex(6)}"]
    repo = IssuerRepository(client, db)
    broker = create_broker(nats_url)
    await broker.connect()
    await ensure_events_stream(broker)
    before = (await _stream(nats_url)).state.messages
    relay = OutboxRelay(repo.outbox, broker, poll_seconds=60)
    now = datetime.now(UTC)
    try:
        await repo.outbox.insert("psEvnt_a", "tessera.events.pass.created", b"{}", now)
        await repo.outbox.insert("psEvnt_b", "tessera.events.pass.updated", b"{}", now)
        assert await relay.drain() == 2
        assert await repo.outbox.size() == 0
        # A crash after publishing but before deleting leaves the event to be sent again.
        await repo.outbox.insert("psEvnt_a", "tessera.events.pass.created", b"{}", now)
        assert await relay.drain() == 1
        assert (await _stream(nats_url)).state.messages == before + 2
    finally:
        await broker.stop()
        await client.drop_database(db.name)
        await client.close()


class MovableClock:
    def __init__(self) -> None:
        self.moment = datetime.now(UTC)

    def now(self) -> datetime:
        return self.moment


def _event() -> PassEventMessage:
    pass_id = new_id("pass")
    snapshot = PassSnapshot(
        id=pass_id,
        short_id="s" * 16,
        mode="test",
        holder_email=None,
        holder_name=None,
        field_values={},
        voided=False,
    )
    return PassEventMessage(
        id=new_id("pass_event"),
        account_id="acct_x",
        mode="test",
        pass_id=pass_id,
        event_type="updated",
        metadata={"stage": "pushed"},
        created_at=datetime.now(UTC),
        pass_snapshot=snapshot,
    )


@pytest.fixture
async def repo(mongo_url: str) -> AsyncIterator[IssuerRepository]:
    client = create_client(mongo_url)
    db = client[f"t_{secrets.token_hex(6)}"]
    try:
        yield IssuerRepository(client, db)
    finally:
        await client.drop_database(db.name)
        await client.close()


async def test_a_live_update_goes_to_its_work_queue_not_to_the_events_stream(
    repo: IssuerRepository, nats_url: str
) -> None:
    """An update's event reaches the events stream only through the events service, which
    pushes the pass's devices first (services/events/push.py)."""
    broker = create_broker(nats_url)
    await broker.connect()
    await ensure_streams(broker)
    relay = OutboxRelay(repo.outbox, broker, poll_seconds=60)
    update = LiveUpdate(event=_event())
    events_before = (await _stream(nats_url)).state.messages
    now = datetime.now(UTC)
    try:
        async with repo.unit_of_work() as uow:
            await uow.add_outbox(update, now)
        assert await relay.drain() == 1
        js = broker.connection.jetstream()
        message = await js.get_last_msg(LIVE_UPDATES_STREAM, "tessera.live.pass.updated")
        assert message.headers is not None
        assert message.headers["Nats-Msg-Id"] == update.event.id
        assert message.data is not None
        assert live_update_adapter.validate_json(message.data) == update
        assert (await _stream(nats_url)).state.messages == events_before
    finally:
        await broker.stop()


async def test_two_replicas_draining_one_outbox_publish_each_event_once(
    mongo_url: str, nats_url: str
) -> None:
    """Every issuer replica runs a relay over the same outbox: they race for the same batches,
    and each claims its own (a lease on each document), so each event is sent once."""
    client = create_client(mongo_url)
    db = client[f"t_{secrets.token_hex(6)}"]
    repo = IssuerRepository(client, db)
    brokers = [create_broker(nats_url) for _ in range(2)]
    for broker in brokers:
        await broker.connect()
    await ensure_events_stream(brokers[0])
    before = (await _stream(nats_url)).state.messages
    now = datetime.now(UTC)
    try:
        for _ in range(120):
            await repo.outbox.insert(
                new_id("pass_event"), "tessera.events.pass.created", b"{}", now
            )
        relays = [OutboxRelay(repo.outbox, broker, poll_seconds=60) for broker in brokers]
        sent = await asyncio.gather(*(relay.drain() for relay in relays))
        assert sum(sent) == 120
        assert await repo.outbox.size() == 0
        assert (await _stream(nats_url)).state.messages == before + 120
    finally:
        for broker in brokers:
            await broker.stop()
        await client.drop_database(db.name)
        await client.close()


async def _connected(nats_url: str) -> NatsBroker:
    broker = create_broker(nats_url)
    await broker.connect()
    await ensure_events_stream(broker)
    return broker


async def test_an_event_too_large_for_nats_is_set_aside_and_the_rest_flows(
    repo: IssuerRepository, nats_url: str
) -> None:
    """F01: one event over max_payload used to fail its batch of 100 forever, and every event
    behind it with it. Now it is set aside at once and the others are published."""
    broker = await _connected(nats_url)
    relay = OutboxRelay(repo.outbox, broker, poll_seconds=60)
    now = datetime.now(UTC)
    too_large = b"x" * (broker.connection.max_payload + 1)
    outbox = repo.outbox
    try:
        # The smallest id: first in every batch, as a jammed event was.
        await outbox.insert("psEvnt_0", "tessera.events.pass.updated", too_large, now)
        await outbox.insert("psEvnt_1", "tessera.events.pass.created", b"{", now)
        for _ in range(150):
            await outbox.insert(new_id("pass_event"), "tessera.events.pass.created", b"{}", now)
        await outbox.documents.update_one({"_id": "psEvnt_1"}, {"$unset": {"subject": ""}})
        assert await relay.drain() == 150
        assert await outbox.size() == 0
        dead = {doc["_id"]: doc async for doc in outbox.dead_letters.find()}
        assert set(dead) == {"psEvnt_0", "psEvnt_1"}
        assert "over the" in dead["psEvnt_0"]["reason"]
        assert "malformed" in dead["psEvnt_1"]["reason"]
        assert bytes(dead["psEvnt_0"]["payload"]) == too_large  # kept for the operator
        assert "lease_owner" not in dead["psEvnt_0"]  # the document as it was committed
        assert await outbox.dead_letter_count() == 2
    finally:
        await broker.stop()


async def test_an_event_that_keeps_failing_alone_backs_off_then_is_set_aside(
    repo: IssuerRepository, nats_url: str
) -> None:
    """A subject no stream captures fails (no responders) while the rest is published: it
    waits longer each time instead of being retried in every batch, then is set aside."""
    clock = MovableClock()
    broker = await _connected(nats_url)
    relay = OutboxRelay(repo.outbox, broker, poll_seconds=60, clock=clock)
    outbox = repo.outbox
    try:
        await outbox.insert("psEvnt_0", "nowhere.pass.created", b"{}", clock.moment)
        await outbox.insert(
            new_id("pass_event"), "tessera.events.pass.created", b"{}", clock.moment
        )
        assert await relay.drain() == 1
        stuck = await outbox.documents.find_one({"_id": "psEvnt_0"})
        assert stuck is not None
        assert stuck["attempts"] == 1
        assert await outbox.due(clock.moment, 100) == []  # backing off
        for _ in range(MAX_ISOLATED_FAILURES - 1):
            clock.moment += MAX_RETRY_DELAY
            await outbox.insert(
                new_id("pass_event"), "tessera.events.pass.created", b"{}", clock.moment
            )
            assert await relay.drain() == 1
        assert await outbox.size() == 0
        assert await outbox.dead_letter_count() == 1
    finally:
        await broker.stop()


async def test_when_nothing_can_be_published_no_event_is_blamed(
    repo: IssuerRepository, nats_url: str
) -> None:
    """NATS unavailable: the drain fails as a whole and the events stay as they were (held
    until the relay's next tick, not blamed)."""
    broker = await _connected(nats_url)
    relay = OutboxRelay(repo.outbox, broker, poll_seconds=60)
    now = datetime.now(UTC)
    for _ in range(3):
        await repo.outbox.insert(new_id("pass_event"), "tessera.events.pass.created", b"{}", now)
    await broker.stop()
    with pytest.raises(Exception):  # noqa: B017, PT011  # whatever the closed client raises
        await relay.drain()
    kept = await repo.outbox.documents.find().to_list()
    assert len(kept) == 3
    assert all("attempts" not in doc for doc in kept)
    assert len(await repo.outbox.due(now + timedelta(seconds=61), 100)) == 3
    assert await repo.outbox.dead_letter_count() == 0
