"""Sends due deliveries: the webhook claim and attempt policy over the shared leased poller
(shared/poller.py), which runs the loop, the limits and the graceful stop.

Pending retries live in MongoDB only (never as delayed NACKs on the JetStream consumer, which
would count against its max_ack_pending and stall every other delivery behind one failing
endpoint), so they survive a restart of anything. Any number of replicas run this loop:

- A claim is one conditional update by id (the effect of `find_one_and_update`, in a form the
  embedded store serves fast): the delivery must still be due, unchanged since it was read and
  free of a live lease; it gets `lease_until` and the token of the claim (unique to it), so
  two replicas never hold the same attempt. The outcome is written only under that token. The
  lease (TESSERA_WEBHOOKS_LEASE_SECONDS, longer than the request timeout) outlives any attempt
  of a live replica; when a replica dies mid-attempt, its lease expires and another takes it
  over, and so does an attempt cut short by a stop after its grace period.
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
import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from functools import partial

from services.webhooks.repository import WebhookRepository
from services.webhooks.retries import NextState
from shared.clock import Clock
from shared.models import DeliveryRecord
from shared.poller import Batch, KeyLimit, Lease, Poller

log = logging.getLogger(__name__)

# attempt(delivery, claim token, sent): `sent()` is called once the HTTP exchange is over, so
# the endpoint's and the account's slots are free while the outcome is being recorded.
Attempt = Callable[[DeliveryRecord, str, Callable[[], None]], Awaitable[NextState | None]]

ENDPOINT, ACCOUNT = "endpoint", "account"


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
        self._clock = clock
        self._lease = timedelta(seconds=lease_seconds)
        self._attempt: Attempt | None = None
        limits: dict[str, KeyLimit[DeliveryRecord]] = {
            ENDPOINT: KeyLimit(lambda delivery: delivery.webhook_id, max_per_endpoint),
            ACCOUNT: KeyLimit(lambda delivery: delivery.account_id, max_per_account),
        }
        self._poller: Poller[DeliveryRecord] = Poller(
            "webhook-scheduler",
            self._claim_due,
            self._attempt_one,
            concurrency=max_concurrent,
            poll_seconds=poll_seconds,
            limits=limits,
            owner=owner,
        )

    def kick(self) -> None:
        """Look for due deliveries now instead of at the next poll."""
        self._poller.wake()

    def offer(self, created: list[DeliveryRecord]) -> None:
        """Attempt just-created deliveries at once: claimed by id, with no listing query.
        Those that do not fit the limits now are left to the loop, which is woken."""
        self._poller.claim_now(partial(self._claim, created))

    def start(self, attempt: Attempt) -> None:
        """Run the loop, making each claimed attempt with `attempt` (see `Attempt`)."""
        self._attempt = attempt
        self._poller.start()

    async def stop(self, grace_seconds: float) -> None:
        """Stop claiming; let attempts in flight finish for up to `grace_seconds`. An attempt
        cut short keeps its lease, so another replica retries it once the lease expires."""
        await self._poller.stop(grace_seconds)

    async def _claim_due(self, batch: Batch[DeliveryRecord]) -> list[DeliveryRecord]:
        """One query lists due deliveries, twice the batch (a store without the index pays one
        scan per batch, not per claim; some will not fit); those that fit are claimed."""
        due = await self._repo.due(
            self._clock.now(), batch.size * 2, batch.full(ENDPOINT), batch.full(ACCOUNT)
        )
        return await self._claim(due, batch)

    async def _claim(
        self, candidates: Sequence[DeliveryRecord], batch: Batch[DeliveryRecord]
    ) -> list[DeliveryRecord]:
        """Claim those of `candidates` that fit the limits, concurrently, each by id and
        atomically on condition that it is still due and unchanged (so one that another
        replica claimed or attempted in between is skipped)."""
        picked = [delivery for delivery in candidates if batch.fits(delivery)]
        now = self._clock.now()
        claims = await asyncio.gather(
            *(self._repo.claim(d, now, now + self._lease, batch.token) for d in picked),
            return_exceptions=True,
        )
        won: list[DeliveryRecord] = []
        for delivery, claimed in zip(picked, claims, strict=True):
            if isinstance(claimed, BaseException):
                log.error("claiming webhook delivery %s failed: %r", delivery.id, claimed)
            elif claimed:
                won.append(delivery)
        return won

    async def _attempt_one(self, delivery: DeliveryRecord, lease: Lease) -> None:
        attempt = self._attempt
        assert attempt is not None, "start() the scheduler first"
        try:
            state = await attempt(delivery, lease.token, lease.free_keys)
        except Exception:
            # The lease stays; the attempt is taken up again when it expires.
            log.exception("attempt of delivery %s failed", delivery.id)
            return
        if state is not None and state.next_attempt_at is not None:
            # A retry this replica scheduled wakes it when due, ahead of the poll.
            self._poller.wake((state.next_attempt_at - self._clock.now()).total_seconds())
