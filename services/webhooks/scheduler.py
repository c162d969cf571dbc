"""Sends deliveries: first attempts as events arrive, then the webhook claim and attempt
policy over the shared leased poller (shared/poller.py), which runs the loop, the limits and
the graceful stop. docs/webhooks.md#how-deliveries-are-scheduled tells the whole design.

Pending retries live in MongoDB only (never as delayed NACKs on the JetStream consumer, which
would count against its max_ack_pending and stall every other delivery behind one failing
endpoint), so they survive a restart of anything. Any number of replicas run this:

- `store_new` (the consumer's): first attempts that need no check in the store go out before
  their deliveries are stored, which are then stored once with their outcome; the other new
  deliveries are stored already leased to this replica (as many as its limits allow), or
  unleased for the loop. No claim write and no listing query for new deliveries.
- Leased deliveries wait in memory for a sending slot: per endpoint
  (`max_concurrent_per_endpoint`), per account (`max_concurrent_per_account`) and in all
  (`max_concurrent_deliveries`), so a slow or failing endpoint holds only its own slots and
  one account's endpoints only the account's share. Their leases are renewed while they wait,
  and while their attempt is made and recorded, and those still waiting are given back on
  stop.
- The loop lists due deliveries (retries, manual attempts, what was left unleased, expired
  leases of dead replicas) at most DUE_QUERY_LIMIT at a time, and only when it has reason to
  (start, poll, a retry coming due, a wake, a slot freed while work was left behind); it
  claims them with one conditional update under one token, unique to the claim, so two
  replicas never hold the same attempt. Outcomes are written only under that token.
- A Retry-After answer or an endpoint's rate holds the endpoint back in this replica at once,
  for the deliveries it already took up too.
"""

import asyncio
import logging
import time
from asyncio import FIRST_COMPLETED
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from contextlib import suppress
from datetime import datetime, timedelta
from typing import Any, Protocol

from services.webhooks.delivery import Attempted
from services.webhooks.erased_bodies import ErasedBodies
from services.webhooks.fresh import FreshWebhooks
from services.webhooks.repository import WebhookRepository
from services.webhooks.retries import NextState
from services.webhooks.slots import KeyedSlots
from shared.clock import Clock
from shared.models import DeliveryRecord, WebhookRecord
from shared.poller import Batch, KeyLimit, Lease, Poller

log = logging.getLogger(__name__)

# attempt(delivery, its webhook (None: deleted), claim token, sent): `sent()` is called once the
# HTTP exchange is over, so the endpoint's and the account's slots are free while the outcome
# is being recorded.
Attempt = Callable[
    [DeliveryRecord, WebhookRecord | None, str, Callable[[], None]], Awaitable[NextState | None]
]

ENDPOINT, ACCOUNT = "endpoint", "account"
# Deliveries a replica may hold leased, waiting for a sending slot, per sending slot: per
# endpoint, per account and in all.
LEASED_PER_SLOT = 100
LEASED_PER_SLOT_IN_ALL = 20
# The most deliveries one listing query asks for (a store without the index pays per document).
DUE_QUERY_LIMIT = 200
# New deliveries stored per insert.
INSERT_CHUNK = 200
# An attempt whose delivery waited longer than this for its slot reads its webhook again (a
# read shared by the webhook's attempts for as long): a change of the webhook reaches every
# attempt that starts more than about twice this after it (fresh.py).
FRESH_SECONDS = 0.5
# How long the first attempts of new deliveries may take before the deliveries are stored
# without their outcome (recorded later, like any attempt's); and how long a quiet spell
# (no attempt ending) may last before: the attempts left then are slow or waiting for a slot,
# and a slow endpoint must not hold up the storing of its batch for the healthy ones.
FIRST_SEND_SECONDS = 0.25
FIRST_SEND_QUIET_SECONDS = 0.05


class FirstSender(Protocol):
    """Sends first attempts before their deliveries are stored (services/webhooks/delivery.py)."""

    def sends_at_once(self, hook: WebhookRecord, now: datetime) -> bool: ...

    async def send(
        self,
        delivery: DeliveryRecord,
        hook: WebhookRecord,
        now: datetime,
        sent: Callable[[], None],
        *,
        fresh: bool = False,
    ) -> Attempted: ...

    async def record(
        self, delivery: DeliveryRecord, token: str, attempted: Attempted
    ) -> NextState | None: ...

    async def stored(self, sent: list[tuple[DeliveryRecord, Attempted]]) -> None: ...


class Scheduler:
    def __init__(
        self,
        repo: WebhookRepository,
        clock: Clock,
        *,
        lease_seconds: float,
        timeout_seconds: float,
        max_concurrent: int,
        max_per_endpoint: int,
        max_per_account: int,
        poll_seconds: float,
        owner: str | None = None,
    ):
        self._repo = repo
        self._clock = clock
        self._lease = timedelta(seconds=lease_seconds)
        # Renewed this often, a held delivery's lease has more than a request's timeout left
        # whenever its request starts, and a slow outcome write does not outlive it.
        self._renew_every = (lease_seconds - timeout_seconds) / 2
        self._attempt: Attempt | None = None
        # The webhook of each claimed delivery, read with the claim (one query per batch).
        self._webhooks: dict[str, WebhookRecord | None] = {}
        # Webhooks nothing is sent to before a time (rate, Retry-After, disabled): left out of
        # the due queries until then, so their deliveries are not claimed only to wait.
        self._held_back: dict[str, datetime] = {}
        # Leased deliveries waiting for a sending slot, with their claim's token; and those
        # whose attempt is being made or recorded. The leases of both are renewed.
        self._waiting: dict[str, str] = {}
        self._attempting: dict[str, str] = {}
        self._sending_in_all = KeyedSlots(max_concurrent)
        self._sending_to = KeyedSlots(max_per_endpoint)
        self._sending_for = KeyedSlots(max_per_account)
        self._renewer: asyncio.Task[None] | None = None
        self._fresh = FreshWebhooks(repo.webhooks_by_ids, FRESH_SECONDS)
        self._erased = ErasedBodies(repo.erased_bodies, clock.now)
        self._erasure_watch: asyncio.Task[None] | None = None
        self._first: FirstSender | None = None
        # First attempts that outlived FIRST_SEND_SECONDS, to be recorded once done.
        self._following: set[asyncio.Task[None]] = set()
        limits: dict[str, KeyLimit[DeliveryRecord]] = {
            ENDPOINT: KeyLimit(lambda d: d.webhook_id, max_per_endpoint * LEASED_PER_SLOT),
            ACCOUNT: KeyLimit(_scope_of, max_per_account * LEASED_PER_SLOT),
        }
        self._poller: Poller[DeliveryRecord] = Poller(
            "webhook-scheduler",
            self._claim_due,
            self._attempt_one,
            concurrency=max_concurrent * LEASED_PER_SLOT_IN_ALL,
            poll_seconds=poll_seconds,
            limits=limits,
            owner=owner,
            refill_only_when_left_behind=True,
        )

    def kick(self) -> None:
        """Look for due deliveries now instead of at the next poll."""
        self._poller.wake()

    async def store_new(
        self,
        created: list[DeliveryRecord],
        webhooks: dict[str, WebhookRecord],
        redelivered_events: frozenset[str] = frozenset(),
    ) -> list[DeliveryRecord]:
        """Attempt and store new deliveries; answers those stored (a redelivered event's that
        exist already are skipped); raises if an insert failed (the events are redelivered).

        In chunks of INSERT_CHUNK: the first attempts of a chunk go out before it is stored
        (`_send_first`); then one insert stores the chunk: with its outcome, each delivery
        whose attempt ended in time (`_until_sent_or_quiet`); leased to this replica, those
        whose attempt goes on and, as far as the limits allow, the rest, which are attempted
        at once; unleased, what remains, for the loop."""
        stored: list[DeliveryRecord] = []
        for start in range(0, len(created), INSERT_CHUNK):
            chunk = created[start : start + INSERT_CHUNK]
            stored.extend(await self._store_chunk(chunk, webhooks, redelivered_events))
        return stored

    async def _store_chunk(
        self,
        created: list[DeliveryRecord],
        webhooks: dict[str, WebhookRecord],
        redelivered_events: frozenset[str],
    ) -> list[DeliveryRecord]:
        token = self._poller.new_token()
        sending = self._send_first(created, webhooks, redelivered_events, token)
        await _until_sent_or_quiet(set(sending.values()))
        ended = {
            delivery_id: task.result()
            for delivery_id, task in sending.items()
            if task.done() and not task.cancelled() and task.exception() is None
        }
        sent = {key: attempted for key, attempted in ended.items() if attempted is not None}
        going_on = {delivery_id: task for delivery_id, task in sending.items() if not task.done()}
        stored: list[DeliveryRecord] = []

        async def insert_leased(batch: Batch[DeliveryRecord]) -> list[DeliveryRecord]:
            now = self._clock.now()
            lease = {"lease_until": now + self._lease, "lease_owner": token}
            records: list[DeliveryRecord] = []
            leased: set[str] = set()
            for delivery in created:
                if delivery.id in sent:
                    records.append(delivery.model_copy(update=sent[delivery.id].changes))
                elif delivery.id in going_on:
                    records.append(delivery.model_copy(update=lease))
                elif delivery.id in ended:  # paused while it waited: due when the pause ends
                    until = self._paused(delivery.webhook_id) or now
                    records.append(delivery.model_copy(update={"next_attempt_at": until}))
                    self._poller.wake((until - now).total_seconds())
                elif (
                    delivery.id not in sending
                    and self._due_now(delivery, now)
                    and batch.fits(delivery)
                ):
                    leased.add(delivery.id)
                    batch_lease = {**lease, "lease_owner": batch.token}
                    records.append(delivery.model_copy(update=batch_lease))
                else:  # not due, held back, over the limits, or its first send failed
                    records.append(delivery)
            stored.extend(await self._repo.insert_deliveries(records))
            won = [delivery for delivery in stored if delivery.id in leased]
            for delivery in won:
                self._webhooks[delivery.id] = webhooks.get(delivery.webhook_id)
            return won

        try:
            await self._poller.claim_inline(insert_leased)
        finally:
            # Attempts still going on record their outcome once done, if their delivery was
            # stored (if not, the event comes back and they are made again).
            inserted = {delivery.id: delivery for delivery in stored}
            for delivery_id, task in going_on.items():
                if delivery_id in inserted:
                    self._attempting[delivery_id] = token  # stored leased: renewed till recorded
                    self._follow(self._record_later(inserted[delivery_id], token, task))
                else:  # nothing to record it in: let it end, its error (if any) seen
                    task.add_done_callback(_retrieved)
        first = self._first
        done = [(d, sent[d.id]) for d in stored if d.id in sent]
        if first is not None and done:
            await first.stored(done)
            for delivery, attempted in done:
                self._note(delivery.webhook_id, attempted.state)
        return stored

    def _due_now(self, delivery: DeliveryRecord, now: datetime) -> bool:
        """A new delivery whose first attempt is due and whose webhook is not held back."""
        return (
            delivery.status == "pending"
            and delivery.next_attempt_at is not None
            and delivery.next_attempt_at <= now
            and not self._is_held_back(delivery.webhook_id, now)
        )

    def _send_first(
        self,
        created: list[DeliveryRecord],
        webhooks: dict[str, WebhookRecord],
        redelivered_events: frozenset[str],
        token: str,
    ) -> dict[str, asyncio.Task[Attempted | None]]:
        """Start the first attempts that may go out before their delivery is stored: due now,
        to an enabled webhook that needs no check in the store first (no rate, no pause),
        and of an event JetStream delivers for the first time (one delivered before may have
        been sent and stored already). A crash before the store means the event comes back
        and the attempt is made again, with the same delivery id (at least once)."""
        first = self._first
        if first is None or self._poller.stopping:
            return {}
        now = self._clock.now()
        tasks: dict[str, asyncio.Task[Attempted | None]] = {}
        for delivery in created:
            hook = webhooks.get(delivery.webhook_id)
            if (
                hook is not None
                and delivery.event_id not in redelivered_events
                and self._due_now(delivery, now)
                and first.sends_at_once(hook, now)
            ):
                attempt = self._send_now(first, delivery, hook, token)
                tasks[delivery.id] = asyncio.create_task(attempt)
        return tasks

    async def _send_now(
        self, first: "FirstSender", delivery: DeliveryRecord, hook: WebhookRecord, token: str
    ) -> Attempted | None:
        """The attempt; None if the endpoint was paused while it waited for a slot."""
        self._waiting[delivery.id] = token  # its lease, once stored, is renewed while it waits
        try:
            give_back, waited = await self._sending_slots(delivery)
        finally:
            self._waiting.pop(delivery.id, None)
        try:
            if self._poller.stopping:  # not sent: stored due (or given back), for any replica
                return None
            if waited:  # its copy may be older than a change of the webhook (fresh.py)
                now_hook = await self._fresh.get(delivery.webhook_id)
                if now_hook is None or not first.sends_at_once(now_hook, self._clock.now()):
                    return None  # deleted, disabled, paused or throttled since: the loop decides
                hook = now_hook
            if self._paused(delivery.webhook_id) is not None:
                return None
            return await first.send(delivery, hook, self._clock.now(), give_back, fresh=True)
        finally:
            give_back()

    async def _record_later(
        self, delivery: DeliveryRecord, token: str, sending: asyncio.Task[Attempted | None]
    ) -> None:
        first = self._first
        assert first is not None
        try:
            attempted = await sending
        except Exception:
            log.exception("first attempt of delivery %s failed", delivery.id)
            self._attempting.pop(delivery.id, None)
            return  # its lease expires and the loop takes it up
        try:
            if attempted is None:  # paused while it waited: due again when the pause ends
                until = self._paused(delivery.webhook_id) or self._clock.now()
                await self._repo.postpone(delivery.id, token, until, manual=False)
                self._poller.wake((until - self._clock.now()).total_seconds())
            elif (state := await first.record(delivery, token, attempted)) is not None:
                self._note(delivery.webhook_id, state)
        finally:
            self._attempting.pop(delivery.id, None)

    def _follow(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._following.add(task)
        task.add_done_callback(self._following.discard)

    def _note(self, webhook_id: str, state: NextState) -> None:
        """After an attempt (or its postponement): hold the endpoint back if it asked for a
        pause or had to wait, and wake this replica when the delivery is due again, ahead of
        the poll."""
        until = state.paused_until or (state.next_attempt_at if state.held_back else None)
        if until is not None:
            self._held_back[webhook_id] = max(until, self._held_back.get(webhook_id, until))
        if state.next_attempt_at is not None:
            self._poller.wake((state.next_attempt_at - self._clock.now()).total_seconds())

    def _paused(self, webhook_id: str) -> datetime | None:
        """Until when nothing may be sent to the webhook, as this replica knows; None: now."""
        now = self._clock.now()
        return self._held_back[webhook_id] if self._is_held_back(webhook_id, now) else None

    def start(self, attempt: Attempt, first: "FirstSender | None" = None) -> None:
        """Run the loop, making each claimed attempt with `attempt` (see `Attempt`); with
        `first`, new deliveries' first attempts go out before they are stored (`store_new`)."""
        self._attempt = attempt
        self._first = first
        self._poller.start()
        self._renewer = asyncio.create_task(self._renew_leases(), name="webhook-lease-renewer")
        self._erasure_watch = asyncio.create_task(
            self._erased.watch(lambda: {**self._waiting, **self._attempting}, FRESH_SECONDS / 2),
            name="webhook-erasure-watch",
        )

    async def stop(self, grace_seconds: float) -> None:
        """Stop claiming; let attempts in flight finish for up to `grace_seconds`. An attempt
        cut short keeps its lease, so another replica retries it once the lease expires;
        deliveries still waiting for a slot are given back at once, and are not sent if they
        get a slot while this replica stops."""
        self._poller.close()  # from here on, a delivery that gets a slot is not sent
        for task in (self._renewer, self._erasure_watch):
            if task is not None:
                task.cancel()
                with suppress(asyncio.CancelledError):
                    await task
        waiting = dict(self._waiting)
        await self._give_back(waiting)
        await self._poller.stop(grace_seconds)
        if self._following:
            await asyncio.wait(set(self._following), timeout=grace_seconds)
        # Deliveries handed to an attempt just before the stop began to wait after it.
        await self._give_back(
            {key: token for key, token in self._waiting.items() if key not in waiting}
        )

    async def _give_back(self, held: dict[str, str]) -> None:
        if not held:
            return
        try:
            await self._repo.release_many(held)
        except Exception:
            log.exception("giving back %d waiting deliveries failed", len(held))

    def _is_held_back(self, webhook_id: str, now: datetime) -> bool:
        until = self._held_back.get(webhook_id)
        if until is not None and until <= now:
            del self._held_back[webhook_id]
            return False
        return until is not None

    def _held_back_now(self) -> list[str]:
        now = self._clock.now()
        return [hook for hook in list(self._held_back) if self._is_held_back(hook, now)]

    async def _claim_due(self, batch: Batch[DeliveryRecord]) -> list[DeliveryRecord]:
        """One query lists due deliveries (a few more than the room left, as some will not
        fit); those that fit are claimed."""
        due = await self._repo.due(
            self._clock.now(),
            min(batch.size * 2, DUE_QUERY_LIMIT),
            batch.full(ENDPOINT) + self._held_back_now(),
            batch.full(ACCOUNT),
        )
        return await self._claim(due, batch)

    async def _claim(
        self, candidates: Sequence[DeliveryRecord], batch: Batch[DeliveryRecord]
    ) -> list[DeliveryRecord]:
        """Claim those of `candidates` that fit the limits, with one conditional update for
        all (each must still be due and free of a live lease, so one that another replica
        claimed in between is skipped), then read them and their webhooks back."""
        now = self._clock.now()
        picked = [
            delivery
            for delivery in candidates
            if not self._is_held_back(delivery.webhook_id, now) and batch.fits(delivery)
        ]
        won = await self._repo.claim(picked, now, now + self._lease, batch.token)
        if won:
            webhooks = await self._repo.webhooks_by_ids({d.webhook_id for d in won})
            for delivery in won:
                self._webhooks[delivery.id] = webhooks.get(delivery.webhook_id)
        return won

    async def _attempt_one(self, delivery: DeliveryRecord, lease: Lease) -> None:
        attempt = self._attempt
        assert attempt is not None, "start() the scheduler first"
        webhook = self._webhooks.pop(delivery.id, None)
        self._waiting[delivery.id] = lease.token
        # Cancelled while waiting (the stop's grace ended), or given a slot once stopping: not
        # sent, and left in `_waiting` for stop() to give back.
        give_back, waited = await self._sending_slots(delivery)
        if self._poller.stopping:
            give_back()
            return
        self._waiting.pop(delivery.id, None)
        self._attempting[delivery.id] = lease.token

        def sent() -> None:
            give_back()
            lease.free_keys()

        try:
            if waited:  # its copies may be older than a change of the webhook (fresh.py)
                webhook = await self._fresh.get(delivery.webhook_id)
                # or than a redaction's erasure of its body (erased_bodies.py)
                if (erased := self._erased.body_of(delivery.id)) is not None:
                    delivery = delivery.model_copy(update={"payload": erased})
            if (until := self._paused(delivery.webhook_id)) is not None:
                # Paused while it waited (a Retry-After this replica just heard): not sent.
                manual = delivery.manual_at is not None
                await self._repo.postpone(delivery.id, lease.token, until, manual=manual)
                state: NextState | None = NextState(delivery.status, until, held_back=True)
            else:
                state = await attempt(delivery, webhook, lease.token, sent)
        except Exception:
            # The lease stays; the attempt is taken up again when it expires.
            log.exception("attempt of delivery %s failed", delivery.id)
            return
        finally:
            sent()
            self._attempting.pop(delivery.id, None)
        if state is not None:
            self._note(delivery.webhook_id, state)

    async def _sending_slots(self, delivery: DeliveryRecord) -> tuple[Callable[[], None], bool]:
        """Wait for a slot to the endpoint, then for the account, then in all (requests in
        flight); answers the function that gives all three back, and whether the wait was
        long enough for the delivery's copy of its webhook to be read again (fresh.py)."""
        started = time.monotonic()
        taken: list[Callable[[], None]] = []

        def give_back() -> None:
            for give in reversed(taken):
                give()

        try:
            taken.append(await self._sending_to.take(delivery.webhook_id))
            taken.append(await self._sending_for.take(_scope_of(delivery)))
            taken.append(await self._sending_in_all.take(""))
        except BaseException:
            give_back()
            raise
        return give_back, time.monotonic() - started > FRESH_SECONDS

    async def _renew_leases(self) -> None:
        """Keep the leases of deliveries waiting for a slot, or whose attempt is being made or
        recorded, alive (see `_renew_every`): a slow outcome write under load must not let
        another replica take the delivery over and send the attempt again."""
        while True:
            await asyncio.sleep(self._renew_every)
            held = {**self._waiting, **self._attempting}
            if not held:
                continue
            try:
                await self._repo.renew(held, self._clock.now() + self._lease)
            except Exception:
                log.exception("renewing the leases of held deliveries failed")


def _retrieved(task: asyncio.Task[Attempted | None]) -> None:
    if not task.cancelled() and (error := task.exception()) is not None:
        log.warning("an attempt whose delivery was not stored failed: %r", error)


async def _until_sent_or_quiet(sending: set[asyncio.Task[Attempted | None]]) -> None:
    """Wait until every attempt ended, FIRST_SEND_SECONDS passed, or none ended for
    FIRST_SEND_QUIET_SECONDS."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + FIRST_SEND_SECONDS
    while sending and (left := deadline - loop.time()) > 0:
        ended, sending = await asyncio.wait(
            sending, timeout=min(left, FIRST_SEND_QUIET_SECONDS), return_when=FIRST_COMPLETED
        )
        if not ended:
            return


def _scope_of(delivery: DeliveryRecord) -> str:
    """Whose share of the sending slots a delivery takes: its account's, in its mode (test
    webhooks never hold back live ones)."""
    return f"{delivery.account_id}/{delivery.mode}"
