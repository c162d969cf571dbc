"""Live updates: once an update or a void has committed, push every device that registered it.

The command's `updated` (or `voided`) event is committed to the outbox held (`held_until`, one
minute ahead), so the relay does not publish it yet. `LiveUpdates.schedule` pushes in the
background (the command's reply never waits for APNs) and then releases the event with the
counts in its metadata: `devices_pushed` (APNs answered 200) and `push_failures` (anything
else, including `devices_unregistered`, the 410s and invalid tokens). A 410 means the token is
dead for the pass type, and a 400 `BadDeviceToken` or `DeviceTokenNotForTopic` that it never
was one (a fake device registered it): the events service owns `registrations`, so the issuer
asks it over NATS (`drop_push_token`) to remove the registrations that use it.

Nothing here can fail the command. If the issuer dies between the commit and the release, the
relay publishes the event when the hold runs out, marked `push_interrupted` (outbox.py).
"""

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from faststream.nats import NatsBroker

from services.events.repository import RegistrationReads
from services.issuer.apns import ApnsClient, PushResult
from services.issuer.repository import IssuerRepository
from shared.errors import ApiError
from shared.ids import new_id
from shared.messages import DropPushToken, PassEventMessage, wallet_subject
from shared.metrics import APNS_PUSHES
from shared.nats import request_command

log = logging.getLogger(__name__)

PUSH_HOLD = timedelta(minutes=1)
# APNs multiplexes pushes over one HTTP/2 connection; this bounds the streams in flight.
MAX_CONCURRENT_PUSHES = 50


@dataclass(frozen=True)
class PushReport:
    pushed: int
    failures: int
    unregistered: int

    def metadata(self) -> dict[str, int]:
        return {
            "devices_pushed": self.pushed,
            "push_failures": self.failures,
            "devices_unregistered": self.unregistered,
        }


class LiveUpdates:
    def __init__(
        self,
        repo: IssuerRepository,
        registrations: RegistrationReads,
        apns: ApnsClient,
        broker: NatsBroker,
        notify_relay: Callable[[], None],
        request_timeout_seconds: float,
    ):
        self._repo = repo
        self._registrations = registrations
        self._apns = apns
        self._broker = broker
        self._notify_relay = notify_relay
        self._timeout = request_timeout_seconds
        self._tasks: set[asyncio.Task[None]] = set()

    def schedule(self, event: PassEventMessage) -> None:
        """Push the pass of this held event in the background, then release the event."""
        task = asyncio.create_task(self._push_and_release(event), name=f"push-{event.pass_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def stop(self, timeout_seconds: float = 5.0) -> None:
        """Let running pushes finish for a moment; the outbox hold covers any cut short."""
        if self._tasks:
            _, pending = await asyncio.wait(set(self._tasks), timeout=timeout_seconds)
            for task in pending:
                task.cancel()
            for task in pending:
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def push_pass(self, pass_id: str) -> PushReport:
        tokens = await self._registrations.push_tokens(pass_id)
        limit = asyncio.Semaphore(MAX_CONCURRENT_PUSHES)

        async def one(token: str) -> PushResult:
            async with limit:
                return await self._apns.push(token)

        results = await asyncio.gather(*(one(token) for token in tokens))
        for token, result in zip(tokens, results, strict=True):
            APNS_PUSHES.labels(result.outcome).inc()
            if not result.delivered:
                log.warning(
                    "APNs push for %s to token %s... failed: %s %s",
                    pass_id,
                    token[:8],
                    result.status,
                    result.reason,
                )
            if result.unregistered:
                await self._drop_token(token, result)
        return PushReport(
            pushed=sum(result.delivered for result in results),
            failures=sum(not result.delivered for result in results),
            unregistered=sum(result.unregistered for result in results),
        )

    async def _push_and_release(self, event: PassEventMessage) -> None:
        try:
            report = await self.push_pass(event.pass_id)
            released = event.model_copy(update={"metadata": event.metadata | report.metadata()})
            await self._repo.release_outbox(event.id, released.model_dump_json().encode())
        except Exception:
            # The hold runs out and the relay publishes the event marked push_interrupted.
            log.exception("live update of %s failed; its event waits for the hold", event.pass_id)
            return
        self._notify_relay()

    async def _drop_token(self, token: str, result: PushResult) -> None:
        command = DropPushToken(
            command_id=new_id("command"),
            pass_type_identifier=self._apns.topic,
            push_token=token,
            inactive_since=result.inactive_since,
        )
        try:
            await request_command(
                self._broker, wallet_subject(command.type), command, self._timeout
            )
        except ApiError as exc:
            # The next push to this token answers 410 again and retries the removal.
            log.warning("could not drop push token %s...: %s", token[:8], exc.message)
