"""The outbox relay: publishes the committed messages to JetStream, then deletes them.

Most are lifecycle events, for the events stream; an update's or a void's event goes as a
`LiveUpdate` to the live-updates stream instead, for the events service to push the pass's
devices and then publish the event with the push counts (docs/wallet-callbacks.md).

It runs at start (so events left by a crash are sent), whenever a command commits, and on a
timer as a safety net. Publishing uses the event id as Nats-Msg-Id, so a re-send after a crash
between the publish and the delete is dropped by JetStream's duplicate window, and the
consumers dedupe by event id beyond it.

Each event of a batch has its own outcome, so one event that cannot be published never holds
back the others (an event over NATS's max_payload once jammed every tenant's events). An event
that can never be published is set aside in `outbox_dead_letters` at once; one that keeps
failing while the rest of its batch goes out waits longer between tries and is set aside after
`MAX_ISOLATED_FAILURES`. When a whole batch fails (NATS down) nothing is counted against the
events: the relay just tries again at the next tick (docs/operations.md#outbox-dead-letters).
"""

import asyncio
import contextlib
import logging
from datetime import timedelta

from faststream.nats import NatsBroker
from nats.errors import MaxPayloadError

from services.issuer.repository import IssuerRepository
from shared.clock import Clock, SystemClock
from shared.messages import stream_of
from shared.metrics import OUTBOX_SET_ASIDE
from shared.mongo import Document

log = logging.getLogger(__name__)

# Failures of one event while other events of its batches were published, before it is set
# aside; with the backoff below that is about four minutes of trying.
MAX_ISOLATED_FAILURES = 8
MAX_RETRY_DELAY = timedelta(minutes=2)


class Unpublishable(Exception):
    """An outbox document that no retry can publish (malformed, or too large for NATS)."""


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
        """Publish everything in the outbox now; returns how many events were sent.

        Raises the first error when no event of a batch could be published (NATS or the
        stream unavailable): the batch stays as it is for the next try."""
        sent = 0
        while batch := await self._repo.outbox_batch(self._clock.now()):
            # A batch is published concurrently (each publish still waits for JetStream's ack)
            # and each event is removed once its own ack arrived.
            outcomes = await asyncio.gather(
                *(self._publish(doc) for doc in batch), return_exceptions=True
            )
            published = [
                doc["_id"] for doc, error in zip(batch, outcomes, strict=True) if not error
            ]
            failed = [(doc, e) for doc, e in zip(batch, outcomes, strict=True) if e is not None]
            if published:
                await self._repo.outbox_done(published)
                sent += len(published)
            for doc, error in failed:
                if isinstance(error, Unpublishable):
                    await self._set_aside(doc, str(error))
            transient = [(doc, e) for doc, e in failed if not isinstance(e, Unpublishable)]
            if transient and not published:
                raise transient[0][1]
            for doc, error in transient:
                await self._retry_later(doc, error)
        return sent

    async def _publish(self, doc: Document) -> None:
        try:
            subject = str(doc["subject"])
            payload = bytes(doc["payload"])
        except (KeyError, TypeError, ValueError) as exc:
            raise Unpublishable(f"malformed outbox document ({type(exc).__name__})") from exc
        try:
            await self._broker.publish(
                payload,
                subject,
                stream=stream_of(subject),
                headers={"Nats-Msg-Id": str(doc["_id"])},
                timeout=5.0,
            )
        except MaxPayloadError as exc:
            raise Unpublishable(
                f"{len(payload)} bytes, over the {self._max_payload()} bytes NATS carries"
            ) from exc

    def _max_payload(self) -> int | str:
        with contextlib.suppress(Exception):
            return int(self._broker.connection.max_payload)
        return "maximum"

    async def _set_aside(self, doc: Document, reason: str) -> None:
        await self._repo.outbox_set_aside(doc, reason, self._clock.now())
        OUTBOX_SET_ASIDE.inc()
        # The id and the reason only: the payload holds holder data.
        log.error("outbox event %s set aside, it cannot be published: %s", doc["_id"], reason)

    async def _retry_later(self, doc: Document, error: BaseException) -> None:
        """An event that failed while others of its batch were published: it may be the
        problem, so it waits longer each time, and is set aside when it keeps failing."""
        attempts = int(doc.get("attempts") or 0) + 1
        if attempts >= MAX_ISOLATED_FAILURES:
            await self._set_aside(doc, f"failed {attempts} times: {_describe(error)}")
            return
        delay = min(timedelta(seconds=2**attempts), MAX_RETRY_DELAY)
        log.warning("outbox event %s failed (%s); retry in %s", doc["_id"], _describe(error), delay)
        await self._repo.outbox_retry_later(
            doc["_id"], attempts, self._clock.now() + delay, _describe(error)
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


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"[:500]
