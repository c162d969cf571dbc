"""Live updates: push every device that registered an updated or voided pass, then publish the
command's event with the push counts in its metadata.

The issuer commits an update's (or a void's) event as a `LiveUpdate` to the live-updates work
queue instead of the events stream; the events service owns `registrations`, so it pushes, and
only then publishes the event: `devices_pushed` (APNs answered 200), `push_failures` (anything
else, the 410s and invalid tokens included) and `devices_unregistered`. A push that got no
answer or a 500/503 is tried twice more within seconds (PUSH_RETRY_SECONDS) before it counts as
a failure. A 410 means the token is
dead for the pass type, a 400 `BadDeviceToken` or `DeviceTokenNotForTopic` that it never was one
(a fake device registered it): the registrations that use it are removed here.

The event keeps its id, which is its Nats-Msg-Id, so a live update redelivered after a crash
(pushed again, which devices tolerate) records its event once: JetStream drops the second
publish inside its duplicate window, and the events consumer's unique `_id` after it. A batch
whose devices were pushed but whose events could not be published (the events stream down
while the live-updates stream is up) comes back every 2 s until they can: the replica keeps
what it pushed (`PUSHED_KEPT` updates at most), so those redeliveries publish without pushing
every device again.
"""

import asyncio
import logging
from collections import OrderedDict
from dataclasses import dataclass

from faststream.nats import NatsBroker

from services.events.apns import ApnsClient, PushResult
from services.events.registrations import AppleWebService, DropReason
from services.events.repository import Registrations
from services.issuer.reads import IssuerReads
from shared.messages import LiveUpdate, PassEventMessage
from shared.metrics import APNS_PUSHES
from shared.pass_events import publish_event

log = logging.getLogger(__name__)

# APNs multiplexes pushes over one HTTP/2 connection; this bounds the streams in flight of one
# pass, or of one batch of live updates.
MAX_CONCURRENT_PUSHES = 50
# A push APNs did not answer, or failed itself (PushResult.transient), is tried again after
# each of these waits: three tries in all, within a few seconds, so that a blip of APNs or of
# the network does not leave a device without the update until the pass changes again.
PUSH_RETRY_SECONDS = (1.0, 3.0)
# Live updates whose devices were pushed and whose event is not published yet, per replica.
PUSHED_KEPT = 10_000


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
        registrations: Registrations,
        wallet: AppleWebService,
        apns: ApnsClient,
        broker: NatsBroker,
        passes: IssuerReads,
        retry_seconds: tuple[float, ...] = PUSH_RETRY_SECONDS,
    ):
        self._passes = passes
        self._registrations = registrations
        self._wallet = wallet
        self._apns = apns
        self._broker = broker
        self._retry_seconds = retry_seconds
        # The push reports of updates whose event is still to publish, by event id.
        self._pushed: OrderedDict[str, PushReport] = OrderedDict()

    async def deliver(self, update: LiveUpdate) -> PassEventMessage:
        """Push the pass's devices, then publish its event with the counts. Raises when the
        registrations cannot be read or the event cannot be published: retry the live update."""
        (event,) = await self.deliver_many([update])
        return event

    async def deliver_many(self, updates: list[LiveUpdate]) -> list[PassEventMessage]:
        """`deliver` for a batch taken off the work queue: the registrations of all its passes
        read with one query, every device pushed at once (bounded), then every event published.
        Raises if any part fails: the whole batch is retried (pushed again, which devices
        tolerate; published again, which the events' ids dedupe)."""
        done = {u.event.id: self._pushed[u.event.id] for u in updates if u.event.id in self._pushed}
        pass_ids = sorted({u.event.pass_id for u in updates if u.event.id not in done})
        tokens = await self._registrations.push_tokens_of(pass_ids) if pass_ids else {}
        limit = asyncio.Semaphore(MAX_CONCURRENT_PUSHES)
        pushed = await asyncio.gather(
            *(self._push(pass_id, tokens.get(pass_id, []), limit) for pass_id in pass_ids)
        )
        by_pass = dict(zip(pass_ids, pushed, strict=True))
        reports = {u.event.id: done.get(u.event.id) or by_pass[u.event.pass_id] for u in updates}
        for event_id, report in reports.items():
            self._pushed[event_id] = report
            self._pushed.move_to_end(event_id)
        while len(self._pushed) > PUSHED_KEPT:
            self._pushed.popitem(last=False)
        redacted = await self._redacted_since(updates)
        events = [
            _as_published(update.event, reports[update.event.id], update.event.pass_id in redacted)
            for update in updates
        ]
        await asyncio.gather(*(publish_event(self._broker, event) for event in events))
        for event in events:
            self._pushed.pop(event.id, None)
        return events

    async def _redacted_since(self, updates: list[LiveUpdate]) -> set[str]:
        """The passes of `updates` that were redacted since their commit, read for every batch:
        an update published soon after its commit would come before the redaction's second
        erasure (shared/redaction.py), which erases what it brought, but "soon" measured as
        this replica's now less the issuer's `created_at` is only as good as the two clocks'
        agreement (6 s of skew published a redacted holder's data again)."""
        pass_ids = sorted({u.event.pass_id for u in updates})
        return await self._passes.erased_pass_ids(pass_ids)

    async def push_pass(self, pass_id: str) -> PushReport:
        tokens = await self._registrations.push_tokens(pass_id)
        return await self._push(pass_id, tokens, asyncio.Semaphore(MAX_CONCURRENT_PUSHES))

    async def _push(self, pass_id: str, tokens: list[str], limit: asyncio.Semaphore) -> PushReport:

        async def push(token: str) -> PushResult:
            async with limit:
                return await self._apns.push(token)

        async def one(token: str) -> PushResult:
            for wait in self._retry_seconds:
                result = await push(token)
                if not result.transient:
                    return result
                log.info("APNs push for %s to token %s... again in %g s", pass_id, token[:8], wait)
                await asyncio.sleep(wait)
            return await push(token)

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

    async def _drop_token(self, token: str, result: PushResult) -> None:
        reason: DropReason = "push_token_inactive" if result.status == 410 else "push_token_invalid"
        try:
            await self._wallet.drop_push_token(
                self._apns.topic, token, result.inactive_since, reason
            )
        except Exception:
            # The pushes happened: report them. The next push to this token answers 410 (or
            # 400) again and retries the removal.
            log.exception("could not drop push token %s...", token[:8])


def _as_published(event: PassEventMessage, report: PushReport, redacted: bool) -> PassEventMessage:
    """The event with its push counts, and without the holder's data if the pass was redacted
    since the update (a batch slowed by APNs can be published after the redaction and its
    erasures, docs/privacy.md): it would bring the erased data back to the events and the
    webhooks."""
    changes: dict[str, object] = {"metadata": event.metadata | report.metadata()}
    if redacted:
        changes["pass_snapshot"] = event.pass_snapshot.model_copy(
            update={"holder_name": None, "holder_email": None, "field_values": {}}
        )
    return event.model_copy(update=changes)
