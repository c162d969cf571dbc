"""The batched durable consumer of the events stream (shared/event_batches.py) on a real
nats-server, recording into the real store with the events service's own code: what waits in
the stream is handed over in batches, a duplicate does not fail the rest of its batch, a
malformed message is set aside alone, a failed batch comes back, and every event is
acknowledged once it is stored."""

import asyncio
import logging
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime

import pytest
from faststream.nats import NatsBroker
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.errors import NotFoundError

from services.events.repository import EventsRepository
from services.events.service import record_events
from shared import event_batches
from shared.event_batches import BatchConsumer, EventBatchConsumer
from shared.ids import new_id
from shared.messages import EVENTS_STREAM, PassEventMessage, pass_event_adapter
from shared.models import PassSnapshot
from shared.mongo import Database, create_client

DEADLINE_SECONDS = 20.0


async def until(condition: Callable[[], Awaitable[bool]], what: str) -> None:
    """Poll `condition` with a deadline."""
    deadline = time.monotonic() + DEADLINE_SECONDS
    while not await condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def _event(account_id: str) -> PassEventMessage:
    pass_id = new_id("pass")
    snapshot = PassSnapshot(
        id=pass_id,
        short_id="abc",
        mode="test",
        holder_email=None,
        holder_name=None,
        field_values={},
        voided=False,
    )
    return PassEventMessage(
        id=new_id("pass_event"),
        account_id=account_id,
        mode="test",
        pass_id=pass_id,
        event_type="created",
        created_at=datetime.now(UTC),
        pass_snapshot=snapshot,
    )


@pytest.fixture
async def db(mongo_url: str) -> AsyncIterator[Database]:
    client = create_client(mongo_url)
    database = client[f"t_{secrets.token_hex(6)}"]
    await EventsRepository(database).ensure_indexes()
    try:
        yield database
    finally:
        await client.drop_database(database.name)
        await client.close()


async def _publish(broker: NatsBroker, event: PassEventMessage | bytes, msg_id: str) -> None:
    body = event if isinstance(event, bytes) else event.model_dump_json().encode()
    js = broker.connection.jetstream()
    await js.publish("tessera.events.pass.created", body, headers={"Nats-Msg-Id": msg_id})


@asynccontextmanager
async def consuming(
    broker: NatsBroker, durable: str, handle: event_batches.HandleBatch
) -> AsyncIterator[EventBatchConsumer]:
    consumer = EventBatchConsumer(broker, durable, handle)
    consumer.start()
    try:
        yield consumer
    finally:
        await consumer.stop()


async def _nothing_pending(broker: NatsBroker, durable: str) -> bool:
    try:
        info = await broker.connection.jetstream().consumer_info(EVENTS_STREAM, durable)
    except NotFoundError:  # the consumer has not made its durable yet
        return False
    return bool(info.num_pending + info.num_ack_pending == 0)


async def test_waiting_events_come_as_one_batch_and_duplicates_do_not_fail_it(
    broker: NatsBroker, db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    account = new_id("account")
    repo = EventsRepository(db)
    events = [_event(account) for _ in range(30)]
    await record_events(repo, events[:5])  # recorded before: a redelivery, say
    for event in events:
        await _publish(broker, event, event.id)
    await _publish(broker, b'{"not": "an event"}', f"bad-{account}")
    durable = f"test-{secrets.token_hex(4)}"
    batches: list[int] = []

    async def record(batch: list[PassEventMessage]) -> None:
        mine = [event for event in batch if event.account_id == account]
        if mine:
            batches.append(len(mine))
        await record_events(repo, mine)

    caplog.set_level(logging.INFO)
    async with consuming(broker, durable, record):
        await until(lambda: _nothing_pending(broker, durable), "every event acknowledged")
    assert sum(batches) == 30
    assert len(batches) <= 2  # all were waiting: one fetch (of at most BATCH_SIZE) took them
    stored = [doc["_id"] async for doc in db["pass_events"].find({"account_id": account})]
    assert sorted(stored) == sorted(event.id for event in events)
    assert "dropping malformed event" in caplog.text
    assert "already recorded" in caplog.text


async def test_a_failed_batch_comes_back_and_is_stored_once(
    broker: NatsBroker, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(event_batches, "RETRY_SECONDS", 0.1)
    account = new_id("account")
    repo = EventsRepository(db)
    events = [_event(account) for _ in range(4)]
    for event in events:
        await _publish(broker, event, event.id)
    failures = 0
    marked: list[bool] = []  # per event of ours handed over: was it marked as redelivered?

    async def flaky(batch: list[PassEventMessage]) -> None:
        nonlocal failures
        assert isinstance(batch, event_batches.ReceivedBatch)
        marked.extend(
            index in batch.redelivered
            for index, event in enumerate(batch)
            if event.account_id == account
        )
        mine = [event for event in batch if event.account_id == account]
        # Half of it is stored, then the store "fails": the whole batch is redelivered.
        await record_events(repo, mine[: len(mine) // 2])
        if mine and failures == 0:
            failures += 1
            raise ConnectionError("store unavailable")
        await record_events(repo, mine)

    durable = f"test-{secrets.token_hex(4)}"
    async with consuming(broker, durable, flaky):
        await until(lambda: _nothing_pending(broker, durable), "the retried batch acknowledged")
    assert failures == 1
    assert await db["pass_events"].count_documents({"account_id": account}) == 4
    # First handed over as delivered for the first time, then, after the failure, as redelivered.
    assert marked == [False] * 4 + [True] * 4


async def test_with_batches_in_flight_a_waiting_batch_does_not_hold_up_the_next_events(
    broker: NatsBroker,
) -> None:
    """`in_flight`: the consumer fetches on while a batch it took is still being handled (the
    webhooks' batch waiting on its inserts), and each batch is acknowledged when its own
    handling ends. With one batch at a time, the second event would wait for the first."""
    account = new_id("account")
    first, second = _event(account), _event(account)
    release = asyncio.Event()
    handed: list[str] = []

    async def handle(batch: list[PassEventMessage]) -> None:
        mine = [event.id for event in batch if event.account_id == account]
        handed.extend(mine)
        if first.id in mine:
            await release.wait()  # the first batch's "insert" takes its time

    durable = f"test-{secrets.token_hex(4)}"
    consumer = EventBatchConsumer(broker, durable, handle, in_flight=4)
    consumer.start()
    try:
        await _publish(broker, first, first.id)

        async def handed_over(event_id: str) -> bool:
            return event_id in handed

        await until(lambda: handed_over(first.id), "the first event handed over")
        await _publish(broker, second, second.id)
        await until(lambda: handed_over(second.id), "the second, while the first waits")
        assert not release.is_set()
        release.set()
        await until(lambda: _nothing_pending(broker, durable), "both acknowledged")
    finally:
        release.set()
        await consumer.stop()


async def test_a_batch_handled_longer_than_the_ack_wait_is_not_delivered_again_meanwhile(
    broker: NatsBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Live updates waiting on APNs' timeouts and retries can take longer than JetStream's ack
    wait: the batch's messages are reported in progress while it is handled, so no other
    fetch (here another batch in flight; in production another replica) gets them again."""
    monkeypatch.setattr(event_batches, "IN_PROGRESS_SECONDS", 0.3)
    durable = f"test-{secrets.token_hex(4)}"
    js = broker.connection.jetstream()
    await js.add_consumer(
        EVENTS_STREAM,
        ConsumerConfig(
            durable_name=durable,
            ack_policy=AckPolicy.EXPLICIT,
            deliver_policy=DeliverPolicy.NEW,
            ack_wait=1.0,
        ),
    )
    account = new_id("account")
    slow = _event(account)
    handed: list[str] = []

    async def handle(batch: list[PassEventMessage]) -> None:
        mine = [event.id for event in batch if event.account_id == account]
        handed.extend(mine)
        if mine:
            await asyncio.sleep(2.5)  # past the ack wait, twice

    consumer = EventBatchConsumer(broker, durable, handle, in_flight=4)
    consumer.start()
    try:
        await _publish(broker, slow, slow.id)
        await until(lambda: _nothing_pending(broker, durable), "the event acknowledged")
    finally:
        await consumer.stop()
    assert handed == [slow.id]


async def test_a_worker_holds_at_most_max_in_hand_events_and_leaves_the_rest_to_others(
    broker: NatsBroker,
) -> None:
    """`max_in_hand`: with many batches allowed in flight, a worker whose batches all wait
    still takes no more than its share of events; a second worker on the same durable takes
    the rest (a burst is shared between replicas, not taken whole by the first). On a stream
    of its own, so that no other test's events are in it."""
    name = f"T{secrets.token_hex(4)}"
    js = broker.connection.jetstream()
    await js.add_stream(name=name, subjects=[f"{name}.>"])
    events = [_event(new_id("account")) for _ in range(12)]
    release = asyncio.Event()
    first_took: list[str] = []
    second_took: list[str] = []

    def worker(took: list[str], **limits: int) -> BatchConsumer[PassEventMessage]:
        async def handle(batch: list[PassEventMessage]) -> None:
            took.extend(event.id for event in batch)
            await release.wait()

        return BatchConsumer(
            broker,
            "shared",
            handle,
            stream=name,
            subject=f"{name}.>",
            parse=pass_event_adapter,
            in_flight=64,
            **limits,
        )

    first = worker(first_took, max_in_hand=5)
    first.start()
    second = worker(second_took)
    try:
        for event in events:
            await js.publish(f"{name}.created", event.model_dump_json().encode())

        async def first_full() -> bool:
            return len(first_took) == 5

        await until(first_full, "the first worker's share")
        second.start()

        async def rest_taken() -> bool:
            return len(second_took) == 7

        await until(rest_taken, "the rest taken by the second worker")
        assert len(first_took) == 5  # still: its batches have not ended
    finally:
        release.set()
        await second.stop()
        await first.stop()
        await js.delete_stream(name)
    assert sorted(first_took + second_took) == sorted(event.id for event in events)
