"""Sends due deliveries: claims them from MongoDB with a lease, with bounded concurrency.

Pending retries live in MongoDB only (never as delayed NACKs on the JetStream consumer, which
would count against its max_ack_pending and stall every other delivery behind one failing
endpoint), so they survive a restart of anything. Any number of replicas run this loop:

- A claim is one conditional update by id (the effect of `find_one_and_update`, in a form the
  embedded store serves fast): the delivery must still be due, unchanged since it was read and
  free of a live lease; it gets `lease_until` and a token unique to the claim, so two replicas
  never hold the same attempt. The outcome is written only under the same token. The lease
  (TESSERA_WEBHOOKS_LEASE_SECONDS, longer than the request timeout) outlives any attempt of a
  live replica; when a replica dies mid-attempt, its lease expires and another takes it over.
- At most `max_concurrent_deliveries` attempts run at once per replica, at most
  `max_concurrent_per_endpoint` requests to one webhook and at most
  `max_concurrent_per_account` for one account: the due query and the claims skip webhooks and
  accounts at their limit, so a slow or failing endpoint holds only its own slots, and one
  account's endpoints, however many, only the account's share, never delaying other accounts.
- A new delivery is attempted at once: the consumer offers it to the scheduler right after
  inserting it, which claims it by id (no listing query). Retries this replica scheduled wake
  it when due; the poll (`scheduler_poll_seconds`) finds the rest, including deliveries left
  by other replicas and new ones that did not fit the limits when they were offered.
"""

import asyncio
import itertools
import logging
import os
import secrets
import socket
from collections import Counter
from collections.abc import Awaitable, Callable
from contextlib import suppress
from datetime import timedelta

from services.webhooks.repository import WebhookRepository
from services.webhooks.retries import NextState
from shared.clock import Clock
from shared.models import DeliveryRecord

log = logging.getLogger(__name__)

# attempt(delivery, claim token, sent): `sent()` is called once the HTTP exchange is over, so
# the endpoint's and the account's slots are free while the outcome is being recorded.
Attempt = Callable[[DeliveryRecord, str, Callable[[], None]], Awaitable[NextState | None]]


def replica_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


class Scheduler:
    def __init__(
        self,
        repo: WebhookRepository,
        clock: Clock,
        *,
        lease_seconds: float,
        max_concurrent: int,
        max_per_endpoint: int,
        max_per_account: int,
        poll_seconds: float,
        owner: str | None = None,
    ):
        self._repo = repo
        self._attempt: Attempt | None = None
        self._clock = clock
        self._lease = timedelta(seconds=lease_seconds)
        self._max = max_concurrent
        self._max_per_endpoint = max_per_endpoint
        self._max_per_account = max_per_account
        self._poll = poll_seconds
        self._owner = owner or replica_name()
        self._claims = itertools.count(1)
        self._wake = asyncio.Event()
        self._in_flight: set[asyncio.Task[None]] = set()
        self._offers: set[asyncio.Task[None]] = set()
        self._claiming = 0  # claims being made: they hold a slot until they are decided
        self._per_endpoint: Counter[str] = Counter()
        self._per_account: Counter[str] = Counter()
        self._loop_task: asyncio.Task[None] | None = None
        self._stopping = False

    def kick(self) -> None:
        """Look for due deliveries now instead of at the next poll."""
        self._wake.set()

    def offer(self, created: list[DeliveryRecord]) -> None:
        """Attempt just-created deliveries at once: claimed by id, with no listing query.
        Those that do not fit the limits now are left to the loop, which is woken."""
        if self._attempt is None or self._stopping:
            self.kick()
            return
        task = asyncio.create_task(self._offered(created))
        self._offers.add(task)
        task.add_done_callback(self._offers.discard)

    def start(self, attempt: Attempt) -> None:
        """Run the loop, making each claimed attempt with `attempt` (see `Attempt`)."""
        self._attempt = attempt
        self._loop_task = asyncio.create_task(self._run(), name="webhook-scheduler")

    async def stop(self, grace_seconds: float) -> None:
        """Stop claiming; let attempts in flight finish for up to `grace_seconds`. An attempt
        cut short keeps its lease, so another replica retries it once the lease expires."""
        self._stopping = True
        self.kick()
        if self._loop_task is not None:
            await self._loop_task
        if self._offers:
            await asyncio.wait(set(self._offers))
        if self._in_flight:
            await asyncio.wait(set(self._in_flight), timeout=grace_seconds)
        for task in set(self._in_flight):
            task.cancel()
            with suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        while not self._stopping:
            self._wake.clear()
            try:
                await self.fill()
            except Exception:
                # MongoDB unreachable, for instance: the claims are tried again at the next tick.
                log.exception("claiming due webhook deliveries failed")
            with suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self._poll)

    async def fill(self) -> int:
        """Claim and start due attempts until a limit is reached or none is due.

        One query lists due deliveries (a batch, so a store without the index pays one scan
        per batch, not per claim); the ones that fit the limits are then claimed.
        """
        started = 0
        while not self._stopping and (room := self._room()) > 0:
            busy = [hook for hook, n in self._per_endpoint.items() if n >= self._max_per_endpoint]
            full = [acct for acct, n in self._per_account.items() if n >= self._max_per_account]
            candidates = await self._repo.due(self._clock.now(), room * 2, busy, full)
            claimed = await self._claim_and_start(candidates)
            started += claimed
            if claimed == 0 or len(candidates) < room * 2:
                break
        return started

    async def _offered(self, created: list[DeliveryRecord]) -> None:
        try:
            claimed = await self._claim_and_start(created)
        except Exception:
            log.exception("claiming new webhook deliveries failed")
            claimed = 0
        if claimed < len(created):
            self.kick()

    def _room(self) -> int:
        return self._max - len(self._in_flight) - self._claiming

    async def _claim_and_start(self, candidates: list[DeliveryRecord]) -> int:
        """Claim those of `candidates` that fit the limits, concurrently, each by id and
        atomically on condition that it is still due and unchanged (so one that another
        replica claimed or attempted in between is skipped); start their attempts."""
        attempt = self._attempt
        assert attempt is not None, "start() the scheduler first"
        picked: list[tuple[DeliveryRecord, str]] = []  # with its claim token
        for delivery in candidates:
            if self._stopping or self._room() <= 0:
                break
            if (
                self._per_endpoint[delivery.webhook_id] < self._max_per_endpoint
                and self._per_account[delivery.account_id] < self._max_per_account
            ):
                # Every slot is held while the claim is made, so no limit is overshot.
                self._per_endpoint[delivery.webhook_id] += 1
                self._per_account[delivery.account_id] += 1
                self._claiming += 1
                picked.append((delivery, f"{self._owner}/{next(self._claims)}"))
        now = self._clock.now()
        try:
            claims = await asyncio.gather(
                *(self._repo.claim(d, now, now + self._lease, token) for d, token in picked),
                return_exceptions=True,
            )
        finally:
            self._claiming -= len(picked)
        claimed = 0
        for (delivery, token), won in zip(picked, claims, strict=True):
            if won is not True:
                self._release_slots(delivery)  # another replica's, or an error
                if isinstance(won, BaseException):
                    log.error("claiming webhook delivery %s failed: %r", delivery.id, won)
                continue
            task = asyncio.create_task(self._attempt_one(attempt, delivery, token))
            self._in_flight.add(task)
            task.add_done_callback(self._finished)
            claimed += 1
        return claimed

    def _release_slots(self, delivery: DeliveryRecord) -> None:
        for held, key in (
            (self._per_endpoint, delivery.webhook_id),
            (self._per_account, delivery.account_id),
        ):
            held[key] -= 1
            if held[key] <= 0:
                del held[key]

    async def _attempt_one(self, attempt: Attempt, delivery: DeliveryRecord, token: str) -> None:
        held = True

        def sent() -> None:
            nonlocal held
            if held:
                held = False
                self._release_slots(delivery)
                self.kick()

        try:
            state = await attempt(delivery, token, sent)
        except Exception:
            # The lease stays; the attempt is taken up again when it expires.
            log.exception("attempt of delivery %s failed", delivery.id)
            state = None
        finally:
            sent()
        if state is not None and state.next_attempt_at is not None:
            delay = (state.next_attempt_at - self._clock.now()).total_seconds()
            asyncio.get_running_loop().call_later(max(delay, 0.0), self.kick)

    def _finished(self, task: asyncio.Task[None]) -> None:
        # A slot is free only once the task is out of the set: wake the loop after that.
        self._in_flight.discard(task)
        self.kick()
