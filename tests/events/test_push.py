"""Live updates on a real MongoDB, NATS and the fake APNs: counts per answer, a 410 (or a 400
saying the token is invalid) drops the token's registrations with the reason, and the event is
published with the counts once the devices were pushed. Through the live-updates work queue: a
live update waits while no events service runs, and one delivered again records its event
once."""

import asyncio
import itertools
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from faststream.nats import NatsBroker
from prometheus_client import REGISTRY

from services.events.apns import ApnsClient, tls_context
from services.events.events_out import events_outbox
from services.events.handlers import register_live_updates
from services.events.push import LiveUpdates, PushReport
from services.events.registrations import AppleWebService
from services.events.repository import EventsRepository, Registrations
from services.events.service import record_event
from services.issuer.reads import IssuerReads
from shared.apple_identity import ensure_dev_identity
from shared.clock import SystemClock
from shared.ids import new_id
from shared.messages import (
    EVENTS_STREAM,
    LIVE_UPDATES_STREAM,
    LiveUpdate,
    PassEventMessage,
)
from shared.models import PassRecord
from shared.mongo import Database, create_client
from shared.nats import (
    create_broker,
    ensure_events_stream,
    ensure_streams,
    subscribe_to_events,
)
from shared.outbox import Outbox, OutboxRelay
from shared.pass_events import pass_event
from tests.support.fake_apns import FakeApns, running_fake_apns
from tests.support.records import pass_record

PASS_TYPE = "pass.dev.tessera"
# APNs failures worth another try are tried again this soon here (seconds in production).
RETRY_SECONDS = (0.05, 0.05)


@dataclass
class Setup:
    db: Database
    broker: NatsBroker
    registrations: Registrations
    live: LiveUpdates
    fake: FakeApns
    outbox: Outbox

    async def add_pass(self) -> PassRecord:
        record = pass_record(_id=new_id("pass"), serial_number=secrets.token_hex(8))
        await self.db["passes"].insert_one(record.to_document())
        return record

    async def register(self, record: PassRecord, push_token: str) -> None:
        an_hour_ago = datetime.now(UTC) - timedelta(hours=1)
        pass_id = record.id
        registered = await self.registrations.register(
            {
                "_id": secrets.token_hex(8),
                "device": secrets.token_hex(32),
                "pass_type": PASS_TYPE,
                "serial_number": "s",
                "pass_id": pass_id,
                "account_id": "acct_test",
                "mode": "test",
                "push_token": push_token,
                "created_at": an_hour_ago,
                "updated_at": an_hour_ago,
            },
            max_per_pass=100,
            installed=pass_event(record, "installed", {}, an_hour_ago),
        )
        assert registered == "created"


@pytest.fixture
async def setup(mongo_url: str, nats_url: str, tmp_path: Path) -> AsyncIterator[Setup]:
    identity = ensure_dev_identity(tmp_path / "signing")
    client = create_client(mongo_url)
    db = client[f"t_{secrets.token_hex(6)}"]
    broker = create_broker(nats_url)
    await broker.connect()
    await ensure_streams(broker)
    outbox = events_outbox(db)
    registrations = Registrations(db, outbox)
    await registrations.ensure_indexes()
    clock = SystemClock()
    wallet = AppleWebService(registrations, IssuerReads(db), outbox, clock)
    with running_fake_apns(tmp_path / "signing" / "root-ca.pem", tmp_path) as fake:
        tls = tls_context(identity, fake.server_ca_path)
        apns = ApnsClient(fake.url, PASS_TYPE, tls, None, timeout_seconds=5)
        live = LiveUpdates(
            registrations, wallet, apns, broker, IssuerReads(db), retry_seconds=RETRY_SECONDS
        )
        try:
            yield Setup(db, broker, registrations, live, fake, outbox)
        finally:
            await apns.aclose()
            await broker.stop()
            await client.drop_database(db.name)
            await client.close()


async def test_every_registered_device_is_pushed_and_each_answer_counted(setup: Setup) -> None:
    record = await setup.add_pass()
    fine, gone, broken = "a" * 64, "b" * 64, "c" * 64
    for token in (fine, gone, broken):
        await setup.register(record, token)
    await setup.register(await setup.add_pass(), "d" * 64)  # another pass's device is not pushed
    setup.fake.answer(gone, 410, "Unregistered")
    setup.fake.answer(broken, 500, "InternalServerError")
    before = _pushes_by_result()
    report = await setup.live.push_pass(record.id)
    assert report == PushReport(pushed=1, failures=2, unregistered=1)
    after = _pushes_by_result()
    assert {result: after[result] - before[result] for result in after} == {
        "success": 1,
        "unregistered": 1,
        "rejected": 1,
        "error": 0,
    }
    assert {push.token for push in setup.fake.pushes()} == {fine, gone, broken}
    assert await setup.registrations.push_tokens(record.id) == [fine, broken]


async def test_a_push_apns_failed_itself_is_tried_again_before_it_counts_as_failed(
    setup: Setup,
) -> None:
    """APNs answers 503 twice, then takes the push: the device gets the update. A 500 every
    time fails after three tries; a 429 (the token pushed too often) is not tried again."""
    record = await setup.add_pass()
    blip, down, busy = "e" * 64, "f" * 64, "1" * 64
    for token in (blip, down, busy):
        await setup.register(record, token)
    setup.fake.answer(blip, 503, "ServiceUnavailable", times=2)
    setup.fake.answer(down, 500, "InternalServerError")
    setup.fake.answer(busy, 429, "TooManyRequests")
    report = await setup.live.push_pass(record.id)
    assert report == PushReport(pushed=1, failures=2, unregistered=0)
    assert [push.status for push in setup.fake.pushes(blip)] == [503, 503, 200]
    assert len(setup.fake.pushes(down)) == 3
    assert len(setup.fake.pushes(busy)) == 1


async def test_tokens_apns_calls_invalid_are_dropped_like_dead_ones(setup: Setup) -> None:
    """Issue 10 F05: a fake device's made-up token answers 400 BadDeviceToken (or, from another
    pass type, DeviceTokenNotForTopic); its registrations go, other 400s keep theirs. The
    `removed` event says which: `push_token_invalid`, where a 410 says `push_token_inactive`."""
    record = await setup.add_pass()
    made_up, foreign, throttled, dead = "1" * 64, "2" * 64, "3" * 64, "4" * 64
    for token in (made_up, foreign, throttled, dead):
        await setup.register(record, token)
    setup.fake.answer(made_up, 400, "BadDeviceToken")
    setup.fake.answer(foreign, 400, "DeviceTokenNotForTopic")
    setup.fake.answer(throttled, 400, "BadPriority")
    setup.fake.answer(dead, 410, "Unregistered")
    before = _pushes_by_result()
    report = await setup.live.push_pass(record.id)
    assert report == PushReport(pushed=0, failures=4, unregistered=3)
    after = _pushes_by_result()
    assert after["unregistered"] - before["unregistered"] == 3
    assert after["rejected"] - before["rejected"] == 1
    assert await setup.registrations.push_tokens(record.id) == [throttled]
    await OutboxRelay(setup.outbox, setup.broker).drain()  # the events service's relay
    reasons = [
        event.metadata["reason"]
        for event in await _published(setup.broker)
        if event.event_type == "removed" and event.pass_id == record.id
    ]
    assert sorted(reasons) == ["push_token_inactive", "push_token_invalid", "push_token_invalid"]


async def test_the_event_is_published_with_the_counts_after_the_push(setup: Setup) -> None:
    record = await setup.add_pass()
    await setup.register(record, "f" * 64)
    update = _live_update(record)
    published = await setup.live.deliver(update)
    assert published.id == update.event.id
    assert len(setup.fake.pushes("f" * 64)) == 1
    (on_stream,) = [event for event in await _published(setup.broker) if event.id == published.id]
    assert on_stream.metadata == {
        "stage": "pushed",
        "field_values": ["seat"],
        "metadata": [],
        "devices_pushed": 1,
        "push_failures": 0,
        "devices_unregistered": 0,
    }


async def _redact(setup: Setup, record: PassRecord) -> None:
    """The pass as a redaction leaves it (what the issuer's transaction writes)."""
    erased: dict[str, Any] = {
        "holder_name": None,
        "holder_email": None,
        "field_values": {},
        "metadata": {},
        "voided": True,
    }
    await setup.db["passes"].update_one({"_id": record.id}, {"$set": erased})


async def test_an_update_published_after_its_pass_was_redacted_carries_no_holder_data(
    setup: Setup,
) -> None:
    """An update's batch slowed by APNs is published after the pass's redaction and its
    erasures: the event takes the erased pass's (empty) holder data, or it would bring the
    data back to the events and the webhooks (docs/privacy.md)."""
    record = await setup.add_pass()
    assert record.holder_name
    assert record.field_values
    # Committed 30 s ago: its batch waited on APNs, past the redaction's second erasure.
    update = _live_update(record, age=timedelta(seconds=30))
    await _redact(setup, record)
    published = await setup.live.deliver(update)
    snapshot = published.pass_snapshot
    assert (snapshot.holder_name, snapshot.holder_email, snapshot.field_values) == (None, None, {})
    other = await setup.add_pass()  # not redacted: as it was
    late = _live_update(other, age=timedelta(seconds=30))
    assert (await setup.live.deliver(late)).pass_snapshot == other.snapshot()


async def test_a_redacted_pass_s_update_is_checked_whatever_the_clocks_say(setup: Setup) -> None:
    """The issuer's clock ahead of the events service's: the update looks fresh (committed
    "now") though it waited past the redaction's erasures. It was published with the holder's
    data when only updates older than 5 s by this replica's clock were checked."""
    record = await setup.add_pass()
    update = _live_update(record, age=timedelta(seconds=-6))  # written by a clock 6 s ahead
    await _redact(setup, record)
    published = await setup.live.deliver(update)
    assert (published.pass_snapshot.holder_name, published.pass_snapshot.field_values) == (
        None,
        {},
    )


async def test_a_batch_pushes_each_pass_s_devices_and_publishes_each_event_with_its_counts(
    setup: Setup,
) -> None:
    """The work queue is taken a batch at a time: one read of the registrations for all its
    passes, yet each event carries its own pass's counts, and two updates of one pass in the
    same batch are two events."""
    first, second, unregistered = [await setup.add_pass() for _ in range(3)]
    await setup.register(first, "1" * 64)
    await setup.register(first, "2" * 64)
    await setup.register(second, "3" * 64)
    updates = [_live_update(first), _live_update(second), _live_update(unregistered)]
    updates.append(_live_update(first))
    published = await setup.live.deliver_many(updates)
    assert [event.id for event in published] == [update.event.id for update in updates]
    assert [event.metadata["devices_pushed"] for event in published] == [2, 1, 0, 2]
    on_stream = {event.id for event in await _published(setup.broker)}
    assert {event.id for event in published} <= on_stream
    # A pass in the batch twice has its devices pushed once for the batch.
    assert [len(setup.fake.pushes(token * 64)) for token in "123"] == [1, 1, 1]


async def test_a_batch_whose_events_could_not_be_published_is_not_pushed_again(
    setup: Setup,
) -> None:
    """Devices pushed, events not published (the events stream down, the live-updates stream
    up): the batch comes back every 2 s, and each time it pushed every device again, for as
    long as the stream was down. Its redeliveries publish what was pushed, with its counts."""
    record = await setup.add_pass()
    await setup.register(record, "e" * 64)
    update = _live_update(record)
    js = setup.broker.connection.jetstream()
    await js.delete_stream(EVENTS_STREAM)
    try:
        for _ in range(3):  # the redeliveries while the stream is down
            with pytest.raises(Exception):  # noqa: B017, PT011  # whatever the publish raises
                await setup.live.deliver_many([update])
    finally:
        await ensure_events_stream(setup.broker)
    published = await setup.live.deliver_many([update])
    assert len(setup.fake.pushes("e" * 64)) == 1
    assert published[0].metadata["devices_pushed"] == 1
    assert [event.id for event in await _published(setup.broker)] == [update.event.id]


async def test_a_live_update_waits_for_the_events_service(
    setup: Setup, nats_url: str, mongo_url: str
) -> None:
    """Published while no events service runs, it stays in the work queue; once one starts,
    the devices are pushed and the event is recorded, once."""
    record = await setup.add_pass()
    await setup.register(record, "e" * 64)
    update = _live_update(record)
    await _publish(setup.broker, update)
    await _publish(setup.broker, update)  # the outbox relay sending it again after a crash
    assert setup.fake.pushes("e" * 64) == []
    async with _events_service(nats_url, setup) as recorded:
        await _until(lambda: recorded(update.event.id), 1)
        await _until(lambda: _pending(setup.broker), 0)
    assert len(setup.fake.pushes("e" * 64)) == 1
    assert await recorded(update.event.id) == 1


async def test_a_live_update_delivered_again_records_its_event_once(
    setup: Setup, nats_url: str
) -> None:
    """The first delivery pushes and publishes, then fails before the acknowledgement (as a
    crash would): JetStream delivers it again, the device is pushed again, and the event is on
    the stream once, with the same id."""
    record = await setup.add_pass()
    await setup.register(record, "9" * 64)
    update = _live_update(record)
    events_before = await _messages(setup.broker, EVENTS_STREAM)
    failures = [RuntimeError("crashed before the ack")]
    deliver = setup.live.deliver_many

    async def deliver_then_fail_once(updates: list[LiveUpdate]) -> list[PassEventMessage]:
        events = await deliver(updates)
        if failures:
            raise failures.pop()
        return events

    # The crash, patched in: the consumer calls this instance's deliver_many.
    setup.live.deliver_many = deliver_then_fail_once  # type: ignore[method-assign]
    async with _events_service(nats_url, setup) as recorded:
        await _publish(setup.broker, update)
        await _until(lambda: _pending(setup.broker), 0, seconds=20)
        await _until(lambda: recorded(update.event.id), 1)
    assert failures == []
    assert len(setup.fake.pushes("9" * 64)) == 2
    assert await _messages(setup.broker, EVENTS_STREAM) == events_before + 1
    assert await recorded(update.event.id) == 1


def _live_update(record: PassRecord, age: timedelta = timedelta(0)) -> LiveUpdate:
    event = PassEventMessage(
        id=new_id("pass_event"),
        account_id=record.account_id,
        mode=record.mode,
        pass_id=record.id,
        event_type="updated",
        metadata={"stage": "pushed", "field_values": ["seat"], "metadata": []},
        created_at=record.updated_at - age,
        pass_snapshot=record.snapshot(),
    )
    return LiveUpdate(event=event)


async def _publish(broker: NatsBroker, update: LiveUpdate) -> None:
    """As the issuer's outbox relay publishes it."""
    await broker.publish(
        update.model_dump_json().encode(),
        update.subject,
        stream=LIVE_UPDATES_STREAM,
        headers={"Nats-Msg-Id": update.id},
    )


@asynccontextmanager
async def _events_service(
    nats_url: str, setup: Setup
) -> AsyncIterator[Callable[[str], Awaitable[int]]]:
    """The events service's two consumers, on the test's database: the live updates, and the
    events (under a durable of the test's own); yields how often an event id was recorded."""
    broker = create_broker(nats_url)
    repo = EventsRepository(setup.db)
    pushers = register_live_updates(broker, setup.live, workers=4)

    async def record(event: PassEventMessage) -> None:
        await record_event(repo, event)

    async def recorded(event_id: str) -> int:
        return await setup.db["pass_events"].count_documents({"_id": event_id})

    subscribe_to_events(broker, f"test-{secrets.token_hex(4)}", record)
    await broker.start()
    for pusher in pushers:
        pusher.start()
    try:
        yield recorded
    finally:
        for pusher in pushers:
            await pusher.stop()
        await broker.stop()


async def _published(broker: NatsBroker) -> list[PassEventMessage]:
    """Every event on the events stream (a test's nats-server serves one test module)."""
    js = broker.connection.jetstream()
    info = await js.stream_info(EVENTS_STREAM)
    events = []
    for seq in range(info.state.first_seq, info.state.last_seq + 1):
        message = await js.get_msg(EVENTS_STREAM, seq)
        assert message.data is not None
        events.append(PassEventMessage.model_validate_json(message.data))
    return events


async def _messages(broker: NatsBroker, stream: str) -> int:
    return int((await broker.connection.jetstream().stream_info(stream)).state.messages)


async def _pending(broker: NatsBroker) -> int:
    """Live updates not yet acknowledged: the work queue removes each once it is."""
    return await _messages(broker, LIVE_UPDATES_STREAM)


async def _until(fetch: Callable[[], Awaitable[int]], expected: int, seconds: float = 10) -> None:
    """Poll until `fetch()` returns `expected`, for at most `seconds`."""
    async with asyncio.timeout(seconds):
        for _ in itertools.count():
            if await fetch() == expected:
                return
            await asyncio.sleep(0.02)


def _pushes_by_result() -> dict[str, float]:
    return {
        result: REGISTRY.get_sample_value("tessera_apns_pushes_total", {"result": result}) or 0.0
        for result in ("success", "unregistered", "rejected", "error")
    }
