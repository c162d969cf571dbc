"""The outbox relay: publishes committed events to JetStream, then removes them from the outbox.

It runs at start (so events left by a crash are sent), whenever a command commits, and on a
timer as a safety net. Publishing uses the event id as Nats-Msg-Id, so a re-send after a crash
between the publish and the delete is dropped by JetStream's duplicate window, and the
consumers dedupe by event id beyond it.

An event held for live-update pushes (`held_until`) is skipped until the pusher releases it
with its push counts. If the hold runs out first (the issuer died mid-push), the relay publishes
it anyway, marked `push_interrupted`, so the event is late but never lost.
"""

import asyncio
import contextlib
import logging

from faststream.nats import NatsBroker

from services.issuer.repository import IssuerRepository
from shared.clock import Clock, SystemClock
from shared.messages import EVENTS_STREAM, pass_event_adapter
from shared.mongo import Document

log = logging.getLogger(__name__)


class OutboxRelay:
    def __init__(
        self,
        repo: IssuerRepository,
        broker: NatsBroker,
        poll_seconds: float,
        clock: Clock | None = None,
    ):
        self._repo = repo
        self._broker = broker
        self._poll_seconds = poll_seconds
        self._clock = clock or SystemClock()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def notify(self) -> None:
        self._wake.set()

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="outbox-relay")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def drain(self) -> int:
        """Publish everything in the outbox now; returns how many events were sent."""
        sent = 0
        while batch := await self._repo.outbox_batch(self._clock.now()):
            # A batch is published concurrently (each publish still waits for JetStream's ack)
            # and removed only after every ack; a failure leaves the batch to be re-sent.
            await asyncio.gather(*(self._publish(doc) for doc in batch))
            await self._repo.outbox_done([doc["_id"] for doc in batch])
            sent += len(batch)
        return sent

    async def _publish(self, doc: Document) -> None:
        payload = doc["payload"] if doc.get("held_until") is None else _interrupted(doc["payload"])
        await self._broker.publish(
            payload,
            doc["subject"],
            stream=EVENTS_STREAM,
            headers={"Nats-Msg-Id": doc["_id"]},
            timeout=5.0,
        )

    async def _run(self) -> None:
        while True:
            self._wake.clear()
            try:
                await self.drain()
            except Exception:
                # NATS or MongoDB unavailable: keep the events and try again on the next tick.
                log.exception("outbox relay failed; will retry")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=self._poll_seconds)


def _interrupted(payload: bytes) -> bytes:
    """The held event as published when its pushes never reported back."""
    event = pass_event_adapter.validate_json(payload)
    event.metadata = {**event.metadata, "push_interrupted": True}
    return event.model_dump_json().encode()
