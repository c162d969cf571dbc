"""The leased poller against a real MongoDB-wire store, with a minimal user of it: a `jobs`
collection claimed the way the webhook deliveries are (list, then lease each by id on condition
that it is still free). Exclusive claims across pollers, lease expiry takeover, wake, claims of
particular items, bounded concurrency, per-key limits, graceful stop and failing claims."""

import asyncio
import logging
import secrets
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial

import pytest
from pymongo.asynchronous.collection import AsyncCollection

from shared.mongo import Document, create_client
from shared.poller import Batch, KeyLimit, Lease, Poller

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
LEASE = timedelta(seconds=60)
# Far longer than the store round trip the test makes right after a delayed wake.
WAKE_DELAY = 1.0


@dataclass(frozen=True)
class Job:
    id: str
    key: str


class Jobs:
    """A collection of jobs and its claim: what a user of the poller writes."""

    def __init__(self, collection: AsyncCollection[Document]):
        self.collection = collection
        self.now = T0  # the claims' clock, moved by the tests
        self.listings = 0

    async def add(self, count: int, key: str = "k", prefix: str = "job") -> list[str]:
        ids = [f"{prefix}{n:03d}" for n in range(count)]
        await self.collection.insert_many(
            [{"_id": i, "key": key, "done": False, "lease_until": None} for i in ids]
        )
        return ids

    def _free(self) -> Document:
        return {"done": False, "lease_until": {"$not": {"$gte": self.now}}}

    async def claim(self, batch: Batch[Job], keyed: bool = False) -> list[Job]:
        query = self._free()
        if keyed and (full := batch.full("key")):
            query["key"] = {"$nin": full}
        cursor = self.collection.find(query).sort("_id", 1).limit(batch.size * 2)
        listed = [Job(doc["_id"], doc["key"]) async for doc in cursor]
        self.listings += 1
        return await self.lease([job for job in listed if batch.fits(job)], batch.token)

    async def claim_ids(self, ids: list[str], batch: Batch[Job]) -> list[Job]:
        """Claim particular jobs by id, with no listing query."""
        return await self.lease(
            [job for job in (Job(i, "k") for i in ids) if batch.fits(job)], batch.token
        )

    async def lease(self, jobs: Sequence[Job], token: str) -> list[Job]:
        won = []
        for job in jobs:
            leased = await self.collection.update_one(
                {"_id": job.id, **self._free()},
                {"$set": {"lease_owner": token, "lease_until": self.now + LEASE}},
            )
            if leased.modified_count == 1:
                won.append(job)
        return won

    async def finish(self, job: Job, lease: Lease) -> bool:
        """Record the work done, only under the claim's token."""
        done = await self.collection.update_one(
            {"_id": job.id, "lease_owner": lease.token},
            {"$set": {"done": True, "lease_owner": None, "lease_until": None}},
        )
        return done.modified_count == 1

    async def count_done(self) -> int:
        return int(await self.collection.count_documents({"done": True}))

    async def get(self, job_id: str) -> Document:
        doc = await self.collection.find_one({"_id": job_id})
        assert doc is not None
        return dict(doc)


@pytest.fixture
async def jobs(mongo_url: str) -> AsyncIterator[Jobs]:
    client = create_client(mongo_url)
    db = client[f"t_{secrets.token_hex(6)}"]
    try:
        yield Jobs(db["jobs"])
    finally:
        await client.drop_database(db.name)
        await client.close()


def _poller(
    jobs: Jobs,
    work: Callable[[Job, Lease], Awaitable[None]],
    *,
    concurrency: int = 8,
    poll_seconds: float = 0.05,
    per_key: int | None = None,
    owner: str | None = None,
) -> Poller[Job]:
    limits: dict[str, KeyLimit[Job]] = {}
    if per_key is not None:
        limits["key"] = KeyLimit(lambda job: job.key, per_key)
    return Poller(
        "test-poller",
        partial(jobs.claim, keyed=per_key is not None),
        work,
        concurrency=concurrency,
        poll_seconds=poll_seconds,
        limits=limits,
        owner=owner,
    )


async def _until(check: Callable[[], Awaitable[bool] | bool]) -> None:
    """Poll `check` until it holds, for at most 10 s."""
    async with asyncio.timeout(10):
        while True:
            result = check()
            if await result if isinstance(result, Awaitable) else result:
                return
            await asyncio.sleep(0.02)


async def _all_done(jobs: Jobs, count: int) -> None:
    async def done() -> bool:
        return await jobs.count_done() == count

    await _until(done)


async def test_two_pollers_work_each_job_once(jobs: Jobs) -> None:
    for key in range(6):
        await jobs.add(10, key=f"k{key}", prefix=f"j{key}_")
    worked: Counter[str] = Counter()

    async def work(job: Job, lease: Lease) -> None:
        worked[job.id] += 1
        await asyncio.sleep(0)  # yield, so the two pollers interleave
        assert await jobs.finish(job, lease)

    pollers = [_poller(jobs, work, concurrency=4, per_key=2, owner=f"r{n}") for n in range(2)]
    for poller in pollers:
        poller.start()
    try:
        await _all_done(jobs, 60)
    finally:
        for poller in pollers:
            await poller.stop(grace_seconds=5)
    assert len(worked) == 60
    assert set(worked.values()) == {1}


async def test_a_lease_cut_by_a_stop_holds_until_it_expires_then_is_taken_over(
    jobs: Jobs,
) -> None:
    [job_id] = await jobs.add(1)
    started, cut = asyncio.Event(), asyncio.Event()

    async def stuck(job: Job, lease: Lease) -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            cut.set()

    first = _poller(jobs, stuck, owner="first")
    first.start()
    await asyncio.wait_for(started.wait(), timeout=10)
    await first.stop(grace_seconds=0)
    assert cut.is_set()
    held = await jobs.get(job_id)
    assert held["lease_owner"].startswith("first/")
    assert not held["done"]

    taken: list[Lease] = []

    async def work(job: Job, lease: Lease) -> None:
        taken.append(lease)
        assert await jobs.finish(job, lease)

    jobs.now = T0 + LEASE / 2  # the first lease is live: nothing to claim
    second = _poller(jobs, work, owner="second", poll_seconds=3600)
    listings = jobs.listings
    second.start()
    try:
        await _until(lambda: jobs.listings > listings)
        assert (await jobs.get(job_id))["lease_owner"] == held["lease_owner"]
        jobs.now = T0 + LEASE + timedelta(seconds=1)  # the first replica's lease expired
        second.wake()
        await _all_done(jobs, 1)
    finally:
        await second.stop(grace_seconds=5)
    [lease] = taken
    assert lease.token.startswith("second/")
    # The replica that lost its lease can no longer record anything.
    late = Lease(held["lease_owner"], (), lambda keys: None)
    assert not await jobs.finish(Job(job_id, "k"), late)


async def test_wake_claims_at_once_instead_of_at_the_next_poll(jobs: Jobs) -> None:
    async def work(job: Job, lease: Lease) -> None:
        await jobs.finish(job, lease)

    poller = _poller(jobs, work, poll_seconds=3600)  # the poll never comes during this test
    poller.start()
    try:
        await _until(lambda: jobs.listings == 1)
        await jobs.add(3)
        poller.wake()
        await _all_done(jobs, 3)
    finally:
        await poller.stop(grace_seconds=5)


async def test_a_delayed_wake_claims_once_the_delay_passed(jobs: Jobs) -> None:
    loop = asyncio.get_running_loop()
    claimed_at: list[float] = []

    async def work(job: Job, lease: Lease) -> None:
        claimed_at.append(loop.time())
        await jobs.finish(job, lease)

    poller = _poller(jobs, work, poll_seconds=3600)
    poller.start()
    try:
        await _until(lambda: jobs.listings == 1)
        [job_id] = await jobs.add(1)
        woken_at = loop.time()
        poller.wake(delay_seconds=WAKE_DELAY)  # a retry this replica scheduled, due then
        # Not claimed at the wake: the job is still free, and no claim listed it...
        assert (await jobs.get(job_id))["lease_until"] is None
        assert jobs.listings == 1
        # ...it is claimed later, once the delay passed (on the loop's clock, whose timers
        # never fire early), by the claim the timer started.
        await _all_done(jobs, 1)
    finally:
        await poller.stop(grace_seconds=5)
    assert claimed_at[0] - woken_at >= WAKE_DELAY


async def test_claim_now_takes_particular_items_without_a_listing(jobs: Jobs) -> None:
    listed_before: list[int] = []

    async def work(job: Job, lease: Lease) -> None:
        listed_before.append(jobs.listings)
        await jobs.finish(job, lease)

    poller = _poller(jobs, work, poll_seconds=3600)
    poller.start()
    try:
        await _until(lambda: jobs.listings == 1)
        ids = await jobs.add(2)
        poller.claim_now(partial(jobs.claim_ids, ids))
        await _all_done(jobs, 2)
    finally:
        await poller.stop(grace_seconds=5)
    assert listed_before == [1, 1]  # worked before any listing but the first


async def test_at_most_concurrency_items_are_in_work(jobs: Jobs) -> None:
    await jobs.add(10)
    release = asyncio.Event()
    running, most = 0, 0

    async def work(job: Job, lease: Lease) -> None:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await release.wait()
        running -= 1
        await jobs.finish(job, lease)

    poller = _poller(jobs, work, concurrency=3)
    poller.start()
    try:
        await _until(lambda: running == 3)
        release.set()
        await _all_done(jobs, 10)
    finally:
        await poller.stop(grace_seconds=5)
    assert most == 3


async def test_a_busy_key_holds_only_its_own_slots(jobs: Jobs) -> None:
    await jobs.add(8, key="slow", prefix="a")  # listed first
    await jobs.add(1, key="fast", prefix="b")
    release, fast_done = asyncio.Event(), asyncio.Event()
    running: Counter[str] = Counter()
    most_slow = 0

    async def work(job: Job, lease: Lease) -> None:
        nonlocal most_slow
        running[job.key] += 1
        most_slow = max(most_slow, running["slow"])
        if job.key == "slow":
            await release.wait()
        else:
            fast_done.set()
        running[job.key] -= 1
        await jobs.finish(job, lease)

    poller = _poller(jobs, work, concurrency=4, per_key=2)
    poller.start()
    try:
        await asyncio.wait_for(fast_done.wait(), timeout=10)
        assert most_slow == 2  # the key's limit, while the other key's job went out
        release.set()
        await _all_done(jobs, 9)
    finally:
        await poller.stop(grace_seconds=5)
    assert most_slow == 2


async def test_freed_keys_let_the_next_item_of_the_key_start(jobs: Jobs) -> None:
    first_id, _ = await jobs.add(2)
    release = asyncio.Event()
    both_running = asyncio.Event()
    running = 0

    async def work(job: Job, lease: Lease) -> None:
        nonlocal running
        running += 1
        if running == 2:
            both_running.set()
        if job.id == first_id:
            lease.free_keys()  # its request is over; the outcome is still being recorded
            await release.wait()
        running -= 1
        await jobs.finish(job, lease)

    poller = _poller(jobs, work, concurrency=4, per_key=1)
    poller.start()
    try:
        await asyncio.wait_for(both_running.wait(), timeout=10)
        release.set()
        await _all_done(jobs, 2)
    finally:
        await poller.stop(grace_seconds=5)


async def test_stop_lets_work_finish_within_the_grace_and_cuts_the_rest(jobs: Jobs) -> None:
    quick_id, stuck_id = await jobs.add(2)
    proceed = asyncio.Event()
    started: set[str] = set()
    cut: list[str] = []

    async def work(job: Job, lease: Lease) -> None:
        started.add(job.id)
        try:
            await (proceed.wait() if job.id == quick_id else asyncio.Event().wait())
        except asyncio.CancelledError:
            cut.append(job.id)
            raise
        await jobs.finish(job, lease)

    poller = _poller(jobs, work)
    poller.start()
    await _until(lambda: len(started) == 2)
    stopping = asyncio.create_task(poller.stop(grace_seconds=2))
    await _until(lambda: poller.stopping)
    proceed.set()  # the quick job finishes after the stop began, within the grace
    await stopping
    assert cut == [stuck_id]
    assert (await jobs.get(quick_id))["done"]
    stuck = await jobs.get(stuck_id)
    assert not stuck["done"]
    assert stuck["lease_until"] is not None  # kept: another replica takes it once it expires


async def test_a_failing_claim_is_retried_at_the_next_tick_and_gives_its_slots_back(
    jobs: Jobs, caplog: pytest.LogCaptureFixture
) -> None:
    await jobs.add(2)
    calls = 0
    both_running = asyncio.Event()
    running = 0

    async def claim(batch: Batch[Job]) -> Sequence[Job]:
        nonlocal calls
        calls += 1
        if calls <= 2:  # MongoDB unreachable, for instance, after the batch held its slots
            assert all(batch.fits(Job(f"held{n}", "k")) for n in range(batch.size))
            raise ConnectionError("store unavailable")
        return await jobs.claim(batch)

    async def work(job: Job, lease: Lease) -> None:
        nonlocal running
        running += 1
        if running == 2:
            both_running.set()
        await both_running.wait()  # needs both slots: none may stay with the failed claims
        await jobs.finish(job, lease)

    poller = Poller("test-poller", claim, work, concurrency=2, poll_seconds=0.05)
    with caplog.at_level(logging.ERROR, logger="shared.poller"):
        poller.start()
        try:
            await _all_done(jobs, 2)  # with no wake: the poll retried the claim
        finally:
            await poller.stop(grace_seconds=5)
    assert calls >= 3
    assert sum("claiming failed" in r.getMessage() for r in caplog.records) == 2


async def test_a_failing_claim_waits_for_the_next_tick_not_a_tight_loop(
    jobs: Jobs, caplog: pytest.LogCaptureFixture
) -> None:
    calls = 0

    async def claim(batch: Batch[Job]) -> Sequence[Job]:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise ConnectionError("store unavailable")
        return await jobs.claim(batch)

    async def work(job: Job, lease: Lease) -> None:
        await jobs.finish(job, lease)

    poller = Poller("test-poller", claim, work, concurrency=2, poll_seconds=3600)
    with caplog.at_level(logging.ERROR, logger="shared.poller"):
        poller.start()
        try:
            await _until(lambda: any("claiming failed" in r.getMessage() for r in caplog.records))
            await jobs.add(1)  # a round trip to the store, in which a tight loop would claim
            assert calls == 1
            poller.wake()
            await _all_done(jobs, 1)
        finally:
            await poller.stop(grace_seconds=5)


async def test_failed_work_keeps_its_lease_and_the_poller_goes_on(
    jobs: Jobs, caplog: pytest.LogCaptureFixture
) -> None:
    bad_id, _ = await jobs.add(2)

    async def work(job: Job, lease: Lease) -> None:
        if job.id == bad_id:
            raise RuntimeError("boom")
        await jobs.finish(job, lease)

    poller = _poller(jobs, work)
    with caplog.at_level(logging.ERROR, logger="shared.poller"):
        poller.start()
        try:
            await _all_done(jobs, 1)
            await _until(
                lambda: any("work on a claimed item" in r.getMessage() for r in caplog.records)
            )
        finally:
            await poller.stop(grace_seconds=5)
    bad = await jobs.get(bad_id)
    assert not bad["done"]
    assert bad["lease_until"] == T0 + LEASE  # claimed again once it expires, not before
