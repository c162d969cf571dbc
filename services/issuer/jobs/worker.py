"""The job worker: every issuer replica takes pending chunks of jobs on the leased poller.

A claim leases up to `concurrency` chunks (oldest job first) for `lease_seconds`; each chunk is
run by its job type's handler and committed in one transaction: the handler's writes, its
events (outbox) and the chunk's outcome. The commit only matches
the chunk under this claim's lease and while it is pending, so a chunk is done once even if a
replica that lost its lease (paused past it) comes back. A second, small transaction then
counts the chunk into its job (the chunk's move from "counting" to "done" with the job's
counters), so a chunk is counted once; a replica that dies between the two leaves the chunk
"counting", and a sweep of any replica counts it. A replica that
dies keeps its chunks until their lease expires; then another takes them and does them again
from the start, which creates nothing twice (nothing of the dead run was committed). A chunk
claimed `MAX_CHUNK_ATTEMPTS` times without being committed (its handler failed, or its replica
died, every time) is given up: its rows fail with a 500, and the job goes on. A commit held up
by write conflicts does not count (see COMMIT_BUDGET_SHARE).
Uploads that never finished are failed after `upload_timeout` (checked once a minute).
"""

import asyncio
import logging
import random
import time
from collections.abc import Callable, Sequence
from datetime import timedelta

from pymongo.errors import OperationFailure, PyMongoError

from services.issuer.jobs.registry import ChunkResult, JobHandler, JobRegistry, NotYet
from services.issuer.jobs.store import SWEEP_ITEM, Chunk, JobStore
from services.issuer.repository import ConcurrentUpdate, IssuerRepository, is_duplicate
from shared.clock import Clock
from shared.models import FINISHED_JOB_STATUSES, JobRecord, JobRowOutcome, RowError
from shared.mongo import Document, is_write_conflict
from shared.outbox import OutboxRelay
from shared.poller import Batch, Lease, Poller

log = logging.getLogger(__name__)

MAX_CHUNK_ATTEMPTS = 5
# Preparations of a chunk whose passes other commands keep changing (jobs over existing passes).
MAX_PREPARES = 5
STOP_GRACE_SECONDS = 10.0
EXPIRY_CHECK_SECONDS = 60.0
# A commit that lost a write conflict (chunks of one job all count into its document) is
# tried again with a jittered backoff, for at most this share of the lease. One that still
# conflicts then waits for a transaction left open by a replica killed mid-commit (it holds
# the chunk's document until the store drops it: 60 s on MongoDB): the chunk is given back
# to be claimed again after RETRY_SOON_SECONDS, and the claim is not counted as an attempt.
COMMIT_BUDGET_SHARE = 0.5
MAX_CONFLICT_BACKOFF_SECONDS = 0.25
RETRY_SOON_SECONDS = 2.0
# Counting a committed chunk into its job: retried this long, then left to the sweep, which
# every replica runs this often over chunks committed at least this long ago.
COUNT_BUDGET_SECONDS = 10.0
COUNT_SWEEP_SECONDS = 5.0
COUNT_SWEEP_AGE_SECONDS = 15.0


class JobWorker:
    def __init__(
        self,
        repo: IssuerRepository,
        store: JobStore,
        registry: JobRegistry,
        clock: Clock,
        on_commit: Callable[[], None],
        *,
        concurrency: int,
        lease_seconds: float,
        poll_seconds: float,
        upload_timeout_seconds: float,
        owner: str | None = None,
        relay: OutboxRelay | None = None,
        max_prepared_age_seconds: float = 5.0,
    ):
        self._repo = repo
        self._max_prepared_age = max_prepared_age_seconds
        # With a relay, a chunk's events are published by this process right after its commit
        # (shared/outbox.py `publish_committed`), not leased and read back by the relay.
        self._relay = relay
        self._store = store
        self._registry = registry
        self._clock = clock
        self._on_commit = on_commit
        self._lease = timedelta(seconds=lease_seconds)
        self._upload_timeout = timedelta(seconds=upload_timeout_seconds)
        self._next_expiry_check = 0.0
        self._next_count_sweep = 0.0
        self._poller: Poller[Chunk] = Poller(
            "job-worker",
            self._claim,
            self._work,
            concurrency=concurrency,
            poll_seconds=poll_seconds,
            owner=owner,
        )

    def notify(self) -> None:
        """A job was started: claim now instead of at the next poll."""
        self._poller.wake()

    def start(self) -> None:
        self._poller.start()

    async def stop(self) -> None:
        await self._poller.stop(STOP_GRACE_SECONDS)

    async def _claim(self, batch: Batch[Chunk]) -> list[Chunk]:
        await self._expire_uploads()
        await self._count_left_behind()
        if batch.size <= 0:
            return []
        now = self._clock.now()
        chunks = await self._store.claim(now, now + self._lease, batch.token, batch.size)
        if chunks:
            await self._store.mark_running(sorted({chunk.job_id for chunk in chunks}), now)
        return chunks

    async def _expire_uploads(self) -> None:
        if time.monotonic() < self._next_expiry_check:
            return
        self._next_expiry_check = time.monotonic() + EXPIRY_CHECK_SECONDS
        now = self._clock.now()
        for job_id in await self._store.expire_uploads(now - self._upload_timeout, now):
            log.warning("job %s failed: its upload did not finish in time", job_id)

    async def _work(self, chunk: Chunk, lease: Lease) -> None:
        await self.run_chunk(chunk, lease.token)

    async def run_chunk(self, chunk: Chunk, token: str) -> bool:
        """Do one leased chunk and commit it; False if it was not committed here (the job was
        canceled, or another claim took the chunk over)."""
        job = await self._store.job_by_id(chunk.job_id)
        if job is None or job.status in FINISHED_JOB_STATUSES:
            await self._store.drop_chunk(chunk.id, token)  # left behind by a cancel
            return False
        handler = self._registry.handler(chunk.type)
        if handler is None or chunk.attempts > MAX_CHUNK_ATTEMPTS:
            log.error(
                "job %s: chunk %s given up (%s)",
                job.id,
                chunk.id,
                "no handler" if handler is None else f"{chunk.attempts - 1} failed attempts",
            )
            result = _given_up(chunk)
            return await self._commit(job, chunk, token, result)
        aged = False
        try:
            for _ in range(MAX_PREPARES):
                try:
                    return await self._prepare_and_commit(job, chunk, token, handler)
                except ConcurrentUpdate as changed:
                    # A pass the chunk changes was changed meanwhile (a PATCH), or the
                    # preparation is too old to commit: prepare again from fresh reads.
                    aged = isinstance(changed, PreparationAged)
                    log.info("job %s: chunk %s met a concurrent update; again", job.id, chunk.id)
        except NotYet as wait:
            await self._give_back(chunk, token, wait.seconds)
            return False
        # Still changed under it: given back to be claimed again soon, not held for its whole
        # lease (a raise kept it leased, idle, for a minute). Passes that other commands keep
        # changing (a burst of PATCHes) do not count as a failed attempt; preparations too
        # slow to commit do, so a store that never gets fast enough ends in the chunk given up.
        log.warning(
            "job %s: chunk %s kept meeting %s; retried soon",
            job.id,
            chunk.id,
            "slow preparations" if aged else "concurrent updates",
        )
        await self._give_back(chunk, token, RETRY_SOON_SECONDS, counted=aged)
        return False

    async def _prepare_and_commit(
        self, job: JobRecord, chunk: Chunk, token: str, handler: JobHandler
    ) -> bool:
        prepared_from = time.monotonic()
        result = await handler.run(job, chunk)
        return await self._commit(job, chunk, token, result, prepared_from)

    async def _commit(
        self,
        job: JobRecord,
        chunk: Chunk,
        token: str,
        result: ChunkResult,
        prepared_from: float | None = None,
    ) -> bool:
        deadline = time.monotonic() + self._lease.total_seconds() * COMMIT_BUDGET_SHARE
        attempt = 0
        while True:
            attempt += 1
            # Reads older than this may predate a design change whose rollout has looked for
            # passes already (docs/templates.md): not committed. A preparation that was slow
            # itself is made again now; one that aged while its commit was held up by write
            # conflicts is given back like any held-up commit (not counted as an attempt).
            if prepared_from is not None and (
                time.monotonic() - prepared_from > self._max_prepared_age
            ):
                if attempt == 1:
                    raise PreparationAged(chunk.id)
                await self._retry_soon(job, chunk, token)
                return False
            try:
                published = await self._commit_once(chunk, token, result)
            except PyMongoError as exc:
                if is_duplicate(exc):
                    # A unique key taken (a pass's short id drawn twice, say): nothing was
                    # committed; the chunk is claimed and prepared again after its lease.
                    log.warning("job %s: chunk %s met a duplicate key", job.id, chunk.id)
                    return False
                if not is_write_conflict(exc):
                    raise
                if time.monotonic() >= deadline:
                    await self._retry_soon(job, chunk, token)
                    return False
                log.info("job %s: chunk %s conflicted; retrying", job.id, chunk.id)
                backoff = min(MAX_CONFLICT_BACKOFF_SECONDS, 0.01 * attempt)
                await asyncio.sleep(random.uniform(0, backoff))  # noqa: S311  # jitter
                continue
            if published is None:
                log.info(
                    "job %s: chunk %s not committed (taken over or canceled)", job.id, chunk.id
                )
                return False
            if result.events:
                if self._relay is not None:
                    self._relay.publish_committed(published)
                self._on_commit()
            await self._count(chunk.id, chunk.job_id, result.outcomes)
            return True

    async def _retry_soon(self, job: JobRecord, chunk: Chunk, token: str) -> None:
        """A commit held up by write conflicts: given back for RETRY_SOON_SECONDS."""
        log.warning("job %s: chunk %s still conflicts; retried soon", job.id, chunk.id)
        await self._give_back(chunk, token, RETRY_SOON_SECONDS)

    async def _give_back(
        self, chunk: Chunk, token: str, seconds: float, *, counted: bool = False
    ) -> None:
        """The chunk claimed again (and prepared afresh) in `seconds`, this claim not counted
        as an attempt unless `counted`."""
        later = self._clock.now() + timedelta(seconds=seconds)
        try:
            await self._store.retry_soon(chunk.id, token, later, counted=counted)
        except OperationFailure as held:
            # The chunk itself is held: it waits for its lease to run out.
            log.warning("job %s: chunk %s kept its lease: %s", chunk.job_id, chunk.id, held)
        self._poller.wake(seconds)

    async def _commit_once(
        self, chunk: Chunk, token: str, result: ChunkResult
    ) -> list[Document] | None:
        """The chunk's work and outcome in one transaction; not its job's counters: every
        chunk of a job writes that one document, and a conflict there would make a chunk's
        whole transaction (hundreds of inserts) run again. `_count` does that after, in a
        small transaction of its own. The outbox documents committed, or None when the chunk
        was not this claim's to commit."""
        lease = None if self._relay is None else self._relay.committed_lease()
        try:
            async with self._repo.unit_of_work(outbox_lease=lease) as uow:
                now = self._clock.now()
                session = uow.session
                if not await self._store.job_open(session, chunk.job_id):
                    raise _NotOurs  # canceled meanwhile
                await result.write(uow)
                await uow.add_outbox_many(result.events, now)
                await uow.flush()
                # Last: the chunk is the document a take-over would contend for.
                if not await self._store.finish_chunk(session, chunk, token, result.outcomes, now):
                    raise _NotOurs
        except _NotOurs:
            return None  # the transaction was aborted: nothing of this run is written
        return uow.outbox_documents

    async def _count(self, chunk_id: str, job_id: str, outcomes: Sequence[JobRowOutcome]) -> None:
        """Count a committed chunk into its job, retrying write conflicts (concurrent chunks
        of the job) for up to COUNT_BUDGET_SECONDS; a chunk still uncounted then (or whose
        replica died before this) is counted by the next sweep of any replica."""
        deadline = time.monotonic() + COUNT_BUDGET_SECONDS
        attempt = 0
        while True:
            attempt += 1
            try:
                async with self._repo.unit_of_work() as uow:
                    await self._store.count(
                        uow.session, chunk_id, job_id, outcomes, self._clock.now()
                    )
                return
            except PyMongoError as exc:
                if not is_write_conflict(exc) or time.monotonic() >= deadline:
                    log.warning("job %s: chunk %s left to the sweep: %s", job_id, chunk_id, exc)
                    return
                backoff = min(MAX_CONFLICT_BACKOFF_SECONDS, 0.005 * attempt)
                await asyncio.sleep(random.uniform(0, backoff))  # noqa: S311  # jitter

    async def _count_left_behind(self) -> None:
        if time.monotonic() < self._next_count_sweep:
            return
        self._next_count_sweep = time.monotonic() + COUNT_SWEEP_SECONDS
        before = self._clock.now() - timedelta(seconds=COUNT_SWEEP_AGE_SECONDS)
        for doc in await self._store.uncounted(before):
            outcomes = [JobRowOutcome.model_validate(o) for o in doc.get("outcomes", [])]
            await self._count(str(doc["_id"]), str(doc["job_id"]), outcomes)


class PreparationAged(ConcurrentUpdate):
    """A chunk's preparation took longer than the age a commit allows (the store or the
    replica was too busy): not another command's change."""


class _NotOurs(Exception):
    """The chunk is no longer this claim's to commit."""


def _given_up(chunk: Chunk) -> ChunkResult:
    error = RowError(
        status=500,
        type="api_error",
        code="job_chunk_failed",
        message="This row could not be processed; it was tried several times. Send it again.",
    )
    outcomes = []
    for item in chunk.items:
        if item == SWEEP_ITEM:
            continue  # not a row: a rollout's sweep (jobs/rollout.py)
        if isinstance(item, dict):
            outcomes.append(JobRowOutcome(row=item.get("row"), error=error))
        else:
            outcomes.append(JobRowOutcome(pass_id=str(item), error=error))
    return ChunkResult(outcomes=outcomes)
