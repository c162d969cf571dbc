"""The durable consumers of the events stream, a batch at a time (the events and the webhooks
services; both replicas of each share their durable consumer), and of the live-updates work
queue (the events service), the same way.

Each fetch takes what the stream has for the consumer, up to `BATCH_SIZE` events, as soon as
there is at least one (nats-server answers a pull at the first message rather than waiting for
the batch to fill), and hands them to the handler at once, so the handler stores a batch with
one `insert_many` instead of a write per event. Every event of the batch is acknowledged once
the handler returned, which it does only when the whole batch is stored; if it raises (MongoDB
down), every event of the batch is negatively acknowledged and comes back after
`RETRY_SECONDS`: the handlers dedupe by id, so what was stored before the failure is not
stored twice. A message that can never parse as a `PassEventMessage` would come back forever:
it is rejected (terminated), loudly, and the rest of its batch goes on.
"""

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from faststream.nats import NatsBroker
from nats.aio.msg import Msg
from nats.errors import Error as NatsError
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.client import JetStreamContext
from pydantic import TypeAdapter, ValidationError

from shared.messages import (
    EVENTS_STREAM,
    EVENTS_SUBJECT_PREFIX,
    PassEventMessage,
    pass_event_adapter,
)
from shared.mongo import origin

log = logging.getLogger(__name__)

BATCH_SIZE = 100
# How long one fetch waits for a first event; only bounds how soon a stop is noticed.
FETCH_SECONDS = 1.0
# How long a fetch that has its first event waits for more to fill its batch.
GATHER_SECONDS = 0.01
# A batch the handler failed comes back after this long, not at once: an outage is no busy loop.
RETRY_SECONDS = 1.0
# While a batch is handled, its messages are reported in progress this often, so that a slow
# batch (live updates waiting on APNs' timeouts and retries) is not delivered again to another
# fetcher once JetStream's ack wait (30 s by default) runs out.
IN_PROGRESS_SECONDS = 10.0
STOP_GRACE_SECONDS = 5.0

T = TypeVar("T")
HandleBatch = Callable[[list[PassEventMessage]], Awaitable[None]]


class ReceivedBatch(list[T]):
    """What a handler is given: the batch's messages, parsed, in order; `redelivered` holds
    the positions of those JetStream delivered before (a handler that acts before storing,
    like the webhooks' first attempts, treats them as possibly handled already)."""

    def __init__(self, items: list[T], redelivered: frozenset[int]):
        super().__init__(items)
        self.redelivered = redelivered


class BatchConsumer(Generic[T]):
    """A worker (shared.connections.running starts it once the streams exist) that hands the
    messages of a durable pull consumer of `stream`, parsed by `parse`, to `handle` a batch at
    a time. Several workers may share one durable: each fetches its own batches.

    With `in_flight` above 1, the worker fetches the next batch while earlier ones are still
    being handled, up to `in_flight` batches at once (each is acknowledged when its own
    handling ends): a handler that acts at once and stores after (the webhooks' first
    attempts) then never leaves new events waiting in the stream behind its writes. With
    `max_in_hand`, the worker also holds at most that many events at once (a fetch asks for
    no more than the room left): many small batches under a steady trickle, yet never more
    than its share of a burst, which other replicas then take."""

    def __init__(
        self,
        broker: NatsBroker,
        durable: str,
        handle: Callable[[list[T]], Awaitable[None]],
        *,
        stream: str,
        subject: str,
        parse: TypeAdapter[T],
        batch_size: int = BATCH_SIZE,
        retry_seconds: float = RETRY_SECONDS,
        in_flight: int = 1,
        max_in_hand: int | None = None,
    ) -> None:
        self._broker = broker
        self._durable = durable
        self._handle = handle
        self._stream = stream
        self._subject = subject
        self._parse = parse
        self._batch_size = batch_size
        self._retry_seconds = retry_seconds
        self._stopping = asyncio.Event()
        self._slots = asyncio.Semaphore(in_flight)
        self._max_in_hand = max_in_hand
        self._in_hand = 0
        self._released = asyncio.Event()
        self._handling: set[asyncio.Task[None]] = set()
        self._task: asyncio.Task[None] | None = None
        self._subscription: JetStreamContext.PullSubscription | None = None

    def start(self) -> None:
        self._stopping.clear()
        self._task = asyncio.create_task(self._run(), name=f"consumer-{self._durable}")

    async def stop(self) -> None:
        """Take no new batch; let the one in hand finish (and be acknowledged) for a while."""
        self._stopping.set()
        if self._task is None:
            return
        try:
            await asyncio.wait_for(asyncio.shield(self._task), STOP_GRACE_SECONDS)
        except TimeoutError:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        try:
            while not self._stopping.is_set():
                await self._slots.acquire()
                room = await self._room()
                messages = await self._fetch(room) if room > 0 else []
                if not messages:
                    self._slots.release()
                    continue
                self._in_hand += len(messages)
                task = asyncio.create_task(self._process_then_release(messages))
                self._handling.add(task)
                task.add_done_callback(self._handling.discard)
            # Stopping: the batches in hand are handled and acknowledged before the end.
            if self._handling:
                await asyncio.gather(*self._handling, return_exceptions=True)
        finally:
            for task in self._handling:
                task.cancel()
            # A pull subscription left open holds up the connection's drain at shutdown.
            await self._unsubscribe()

    async def _process_then_release(self, messages: list[Msg]) -> None:
        try:
            await self._process(messages)
        finally:
            self._in_hand -= len(messages)
            self._released.set()
            self._slots.release()

    async def _room(self) -> int:
        """How many events the next fetch may take: the batch size, or less when the events
        in hand come near `max_in_hand` (then it waits for some to be handled first)."""
        if self._max_in_hand is None:
            return self._batch_size
        while True:
            self._released.clear()  # before the check: a release after it wakes the wait
            if self._in_hand < self._max_in_hand or self._stopping.is_set():
                return min(self._batch_size, self._max_in_hand - self._in_hand)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._released.wait(), FETCH_SECONDS)

    async def _fetch(self, room: int) -> list[Msg]:
        try:
            if self._subscription is None:
                self._subscription = await self._subscribe()
            return await self._take(self._subscription, room)
        except TimeoutError:
            return []
        except (NatsError, OSError) as exc:
            log.warning("consumer %s: fetch failed (%s); retrying", self._durable, exc)
            # Bind afresh next time (the consumer may have been recreated meanwhile).
            await self._unsubscribe()
            await self._pause(RETRY_SECONDS)
            return []

    async def _take(self, subscription: JetStreamContext.PullSubscription, room: int) -> list[Msg]:
        """The next batch, as soon as there is a first message: nats-py's fetch of a whole
        batch waits, once it lingers on an empty stream, for the batch to fill or its timeout
        to pass (measured: events held for up to FETCH_SECONDS under a steady trickle). So the
        first message is fetched alone, then what else the stream has, waiting at most
        GATHER_SECONDS for it."""
        first = await subscription.fetch(1, timeout=FETCH_SECONDS)
        if room <= 1:
            return first
        try:
            rest = await subscription.fetch(room - 1, timeout=GATHER_SECONDS)
        except (TimeoutError, NatsError, OSError):
            # The first is in hand: handled now, not left to come back after the ack wait.
            rest = []
        return first + rest

    async def _unsubscribe(self) -> None:
        if self._subscription is not None:
            with contextlib.suppress(Exception):
                await self._subscription.unsubscribe()
            self._subscription = None

    async def _subscribe(self) -> JetStreamContext.PullSubscription:
        config = ConsumerConfig(
            durable_name=self._durable,
            ack_policy=AckPolicy.EXPLICIT,
            deliver_policy=DeliverPolicy.ALL,
        )
        return await self._broker.connection.jetstream().pull_subscribe(
            self._subject, durable=self._durable, stream=self._stream, config=config
        )

    async def _process(self, messages: list[Msg]) -> None:
        events: list[T] = []
        parsed: list[Msg] = []
        for message in messages:
            try:
                events.append(self._parse.validate_json(message.data))
            except ValidationError:
                log.error("dropping malformed event %s on %s", _msg_id(message), message.subject)
                await _settle(message.term())
                continue
            parsed.append(message)
        if not events:
            return
        redelivered = frozenset(
            index for index, message in enumerate(parsed) if _num_delivered(message) != 1
        )
        progress = asyncio.create_task(_in_progress(parsed))
        try:
            with origin("consumer"):
                await self._handle(ReceivedBatch(events, redelivered))
        except Exception:
            log.exception(
                "consumer %s: a batch of %d messages failed; it will be redelivered",
                self._durable,
                len(events),
            )
            for message in parsed:
                await _settle(message.nak(delay=self._retry_seconds))
            return
        finally:
            progress.cancel()
        for message in parsed:
            await _settle(message.ack())

    async def _pause(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), seconds)


class EventBatchConsumer(BatchConsumer[PassEventMessage]):
    """A consumer of the events stream (every pass event)."""

    def __init__(
        self,
        broker: NatsBroker,
        durable: str,
        handle: HandleBatch,
        batch_size: int = BATCH_SIZE,
        in_flight: int = 1,
        max_in_hand: int | None = None,
    ) -> None:
        super().__init__(
            broker,
            durable,
            handle,
            stream=EVENTS_STREAM,
            subject=f"{EVENTS_SUBJECT_PREFIX}.>",
            parse=pass_event_adapter,
            batch_size=batch_size,
            in_flight=in_flight,
            max_in_hand=max_in_hand,
        )


async def _in_progress(messages: list[Msg]) -> None:
    """Tell JetStream the messages are still being worked on, every IN_PROGRESS_SECONDS."""
    while True:
        await asyncio.sleep(IN_PROGRESS_SECONDS)
        for message in messages:
            await _settle(message.in_progress())


async def _settle(step: Awaitable[None]) -> None:
    """Acknowledge (or not); a lost acknowledgement only means a redelivery, which dedupes."""
    try:
        await step
    except (NatsError, OSError) as exc:
        log.warning("an acknowledgement was not sent: %s", exc)


def _num_delivered(message: Msg) -> int:
    """How many times JetStream delivered the message (0 when it does not say)."""
    try:
        return int(message.metadata.num_delivered)
    except (NatsError, AttributeError, TypeError, ValueError):
        return 0


def _msg_id(message: Msg) -> str:
    return (message.headers or {}).get("Nats-Msg-Id", "?")
