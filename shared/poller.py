"""One leased poller: the loop of every worker that takes its work out of MongoDB.

Any number of replicas run the same poller over one collection. Exclusivity comes from the
claim, which the user writes: it leases items with a conditional update (still to do, no live
lease), setting a lease expiry and the batch's token, and every later write of the work matches
that token, so a replica whose lease ran out can no longer record anything. The poller decides
when to claim (at start, on `wake()`, every `poll_seconds` as the safety net), how much (at most
`concurrency` items in work, and per `KeyLimit` at most `most` items with one key), and how to
stop (no new claims; work in flight gets a grace period; work cut short keeps its lease, so
another replica takes it over once the lease expires). docs/architecture.md#workers.
"""

import asyncio
import itertools
import logging
import os
import secrets
import socket
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from functools import partial
from typing import Generic, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")
Keys = tuple[str, ...]  # an item's key under each limit, in the limits' order


def replica_name() -> str:
    """This process, as the prefix of its claim tokens: host, pid and a random part (a pid
    can come back after a restart; a claim of the process before must not look like ours)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


@dataclass(frozen=True)
class KeyLimit(Generic[T]):
    """At most `most` items with the same `key(item)` in work at once in one poller."""

    key: Callable[[T], str]
    most: int


class _Slots(Generic[T]):
    """What is in work (or being claimed): a total, and a count per key of each limit."""

    def __init__(self, total: int, limits: Mapping[str, KeyLimit[T]]):
        self.total = total
        self.held = 0
        self.closed = False  # stopping: nothing more is admitted
        self._limits = dict(limits)
        self._counts: dict[str, Counter[str]] = {name: Counter() for name in limits}

    def keys(self, item: T) -> Keys:
        return tuple(limit.key(item) for limit in self._limits.values())

    def full(self, name: str) -> list[str]:
        most = self._limits[name].most
        return [key for key, n in self._counts[name].items() if n >= most]

    def fits(self, keys: Keys) -> bool:
        return (
            not self.closed
            and self.held < self.total
            and all(
                counts[key] < limit.most
                for counts, limit, key in zip(
                    self._counts.values(), self._limits.values(), keys, strict=True
                )
            )
        )

    def take(self, keys: Keys) -> None:
        self.held += 1
        for counts, key in zip(self._counts.values(), keys, strict=True):
            counts[key] += 1

    def give_keys(self, keys: Keys) -> None:
        for counts, key in zip(self._counts.values(), keys, strict=True):
            counts[key] -= 1
            if counts[key] <= 0:
                del counts[key]

    def give(self, keys: Keys) -> None:
        self.held -= 1
        self.give_keys(keys)


class Batch(Generic[T]):
    """What one claim may take: up to `size` items (the room left), leased under `token`,
    which is unique to this claim. With limits, lease only items that `fits()` accepted."""

    def __init__(self, slots: _Slots[T], token: str):
        self.token = token
        self.size = max(slots.total - slots.held, 0)
        self.refused = 0
        self._slots = slots
        self._admitted: Counter[Keys] = Counter()

    def full(self, limit: str) -> list[str]:
        """The keys of the named limit that are at it: leave their items out of the query, or
        the oldest items of one busy key fill every batch and starve the others."""
        return self._slots.full(limit)

    def fits(self, item: T) -> bool:
        """True if the item may be leased now; it then holds its slots while the claim is
        made, so neither one batch nor claims running at once overshoot a limit."""
        keys = self._slots.keys(item)
        if not self._slots.fits(keys):
            self.refused += 1
            return False
        self._slots.take(keys)
        self._admitted[keys] += 1
        return True

    def settle(self, won: Sequence[T]) -> list[Keys]:
        """Called by the poller once the claim returned: the slots of the items won stay
        held (taken now for any leased without `fits`); those admitted but not won (another
        replica's, or an error) are given back."""
        unclaimed = self._admitted.copy()
        held: list[Keys] = []
        for item in won:
            keys = self._slots.keys(item)
            if unclaimed[keys] > 0:
                unclaimed[keys] -= 1
            else:
                self._slots.take(keys)
            held.append(keys)
        for keys in unclaimed.elements():
            self._slots.give(keys)
        self._admitted.clear()
        return held


class Lease:
    """A work function's hold on its item: the claim's token (write outcomes only under it)
    and the item's slots."""

    def __init__(self, token: str, keys: Keys, free_keys: Callable[[Keys], None]):
        self.token = token
        self._keys: Keys | None = keys
        self._give_keys = free_keys

    def free_keys(self) -> None:
        """The part of the work the per-key limits bound is over (a request was answered):
        free those slots now, while the rest (recording the outcome) still holds a total
        slot. Done anyway when the work ends."""
        if self._keys is not None:
            keys, self._keys = self._keys, None
            self._give_keys(keys)


Claim = Callable[[Batch[T]], Awaitable[Sequence[T]]]  # the items it leased
Work = Callable[[T, Lease], Awaitable[None]]


class Poller(Generic[T]):
    """Claims with `claim` and runs `work` on each item claimed, each in its own task; the
    claim tokens are `<owner>/<n>`, `owner` this process by default (`replica_name`)."""

    def __init__(
        self,
        name: str,
        claim: Claim[T],
        work: Work[T],
        *,
        concurrency: int,
        poll_seconds: float,
        limits: Mapping[str, KeyLimit[T]] | None = None,
        owner: str | None = None,
        refill_only_when_left_behind: bool = False,
    ):
        """`refill_only_when_left_behind`: a finished item wakes the loop only when the last
        claim left work behind (items refused by a limit, or a full batch), not after every
        item: for a poller fed mostly by `claim_inline`, whose listing query costs more than
        what waiting for the next poll, retry timer or producer's wake costs."""
        self._name = name
        self._refill_lazily = refill_only_when_left_behind
        self._left_behind = True
        self._claim = claim
        self._work = work
        self._poll = poll_seconds
        self._slots: _Slots[T] = _Slots(concurrency, limits or {})
        self._owner = owner or replica_name()
        self._claims = itertools.count(1)
        self._wake = asyncio.Event()
        self._timers: set[asyncio.TimerHandle] = set()
        self._in_flight: set[asyncio.Task[None]] = set()
        self._offers: set[asyncio.Task[None]] = set()
        self._loop_task: asyncio.Task[None] | None = None

    def new_token(self) -> str:
        """A claim token of this poller's, for work leased outside its claims."""
        return f"{self._owner}/{next(self._claims)}"

    @property
    def stopping(self) -> bool:
        """True once `stop()` began: work in flight may cut a long task short at a safe point."""
        return self._slots.closed

    def wake(self, delay_seconds: float = 0.0) -> None:
        """Claim now (or after the delay: a retry that comes due) instead of at the next poll."""
        if delay_seconds <= 0:
            self._wake.set()
            return
        if self._slots.closed:
            return

        def fire() -> None:
            self._timers.discard(handle)
            self._wake.set()

        handle = asyncio.get_running_loop().call_later(delay_seconds, fire)
        self._timers.add(handle)

    def claim_now(self, claim: Claim[T]) -> None:
        """Run one claim of particular items at once, beside the loop and within the same
        limits: a producer hands over what it just created, claimed by id with no listing
        query. The loop is woken for items that did not fit."""
        if self._loop_task is None or self._slots.closed:
            self.wake()
            return
        task = asyncio.create_task(self._claim_offered(claim), name=f"{self._name}-offer")
        self._offers.add(task)
        task.add_done_callback(self._offers.discard)

    async def claim_inline(self, claim: Claim[T]) -> None:
        """Run one claim in the caller's task and within the same limits, its errors the
        caller's: a producer that stores new items leases those that fit as it stores them
        (no listing query, no second write). Once stopping, nothing fits: the claim stores
        its items unleased, for the loop of this or another replica. The loop is woken for
        items that did not fit."""
        if self._loop_task is None:  # not started: nothing may be leased yet
            await claim(Batch(_Slots(0, {}), f"{self._owner}/{next(self._claims)}"))
            return
        batch, _ = await self._claim_batch(claim)
        if batch.refused:
            self._left_behind = True
            self.wake()

    def start(self) -> None:
        """Run the loop: a first claim at once, then on every wake and poll."""
        assert self._loop_task is None, "the poller runs already"
        self._loop_task = asyncio.create_task(self._run(), name=self._name)

    def close(self) -> None:
        """Claim nothing more from now on (`stopping` is True); `stop()` does it too."""
        self._slots.closed = True
        for timer in self._timers:
            timer.cancel()
        self._timers.clear()
        self._wake.set()

    async def stop(self, grace_seconds: float) -> None:
        """Stop claiming; let work in flight finish for up to `grace_seconds`. Work cut short
        keeps its lease, so another replica takes its item over once the lease expires."""
        self.close()
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
        while not self._slots.closed:
            self._wake.clear()
            try:
                await self._fill()
            except Exception:
                # MongoDB unreachable, for instance: claimed again at the next tick, not at once.
                log.exception("%s: claiming failed; trying again at the next tick", self._name)
            with suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self._poll)

    async def _fill(self) -> None:
        """Claim until the slots are full or nothing more is to be had. A batch that leased
        fewer items than its size, none refused by a limit, found all there was; one whose
        items were refused by a limit is followed by another that leaves those keys out."""
        while not self._slots.closed and self._slots.held < self._slots.total:
            batch, won = await self._claim_batch(self._claim)
            if won == 0 or (won < batch.size and batch.refused == 0):
                self._left_behind = False
                return
        self._left_behind = True

    async def _claim_offered(self, claim: Claim[T]) -> None:
        if self._slots.held >= self._slots.total:
            self.wake()  # the loop claims them when a slot comes free
            return
        try:
            batch, _ = await self._claim_batch(claim)
        except Exception:
            log.exception("%s: claiming offered work failed", self._name)
            self.wake()
            return
        if batch.refused:
            self._left_behind = True
            self.wake()

    async def _claim_batch(self, claim: Claim[T]) -> tuple[Batch[T], int]:
        batch = Batch(self._slots, f"{self._owner}/{next(self._claims)}")
        won: Sequence[T] = []
        try:
            won = await claim(batch)
        finally:
            held = batch.settle(won)  # on an error, every slot the claim held is given back
        for item, keys in zip(won, held, strict=True):
            lease = Lease(batch.token, keys, self._free_keys)
            task = asyncio.create_task(self._work_one(item, lease))
            self._in_flight.add(task)
            task.add_done_callback(partial(self._finished, lease))
        return batch, len(won)

    async def _work_one(self, item: T, lease: Lease) -> None:
        try:
            await self._work(item, lease)
        except Exception:
            # The lease stays: the item is claimed again once it expires.
            log.exception("%s: work on a claimed item failed", self._name)

    def _free_keys(self, keys: Keys) -> None:
        self._slots.give_keys(keys)
        self._refill()

    def _finished(self, lease: Lease, task: asyncio.Task[None]) -> None:
        # The slots are free only once the task is out of the set: wake the loop after.
        self._in_flight.discard(task)
        self._slots.held -= 1
        lease.free_keys()
        self._refill()

    def _refill(self) -> None:
        if self._left_behind or not self._refill_lazily:
            self.wake()
