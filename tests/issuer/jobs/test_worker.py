"""The job framework against the real store, below NATS: an import's upload and start
(IssuerService commands), the worker's chunks (claimed and run here by hand, as the poller
would), forward-only counters, a chunk done twice after a lost lease creating nothing twice,
cancel, the upload timeout, and a chunk that keeps failing given up."""

import asyncio
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import nats
import pytest
from nats.aio.msg import Msg

from services.issuer.artifacts import WalletArtifacts
from services.issuer.bulk import PassMaker
from services.issuer.jobs.import_passes import JOB_TYPE, ImportPasses
from services.issuer.jobs.reads import JobReads
from services.issuer.jobs.registry import ChunkResult, JobRegistry
from services.issuer.jobs.store import Chunk, JobStore
from services.issuer.jobs.worker import (
    MAX_CHUNK_ATTEMPTS,
    MAX_PREPARES,
    RETRY_SOON_SECONDS,
    JobWorker,
)
from services.issuer.repository import ConcurrentUpdate, IssuerRepository
from services.issuer.service import IssuerService
from shared.clock import SystemClock
from shared.errors import InvalidRequest, NotFound
from shared.ids import new_id
from shared.messages import (
    AddImportRows,
    CancelJob,
    ImportChunk,
    ImportRow,
    JobCanceled,
    StartJob,
)
from shared.models import JobRecord, JobRowOutcome, RowError, TemplateRecord, row_error
from shared.nats import create_broker, ensure_events_stream
from shared.outbox import OutboxRelay
from tests.support.inproc_api import ManualClock
from tests.support.issuer import (
    ACCOUNT,
    JOB_LEASE,
    archive_command,
    claim_chunks,
    command_base,
    job_worker,
    template_command,
)
from tests.support.outbox import outbox_messages

LEASE = JOB_LEASE
PRE_FAILED = RowError(status=402, type="billing_error", code="quota_exceeded", message="no")


@pytest.fixture
def service(repo: IssuerRepository, artifacts: WalletArtifacts, store: JobStore) -> IssuerService:
    return IssuerService(repo, artifacts, SystemClock(), lambda: None, job_store=store)


def _import_worker(
    repo: IssuerRepository,
    artifacts: WalletArtifacts,
    store: JobStore,
    relay: OutboxRelay | None = None,
) -> JobWorker:
    """A worker of import jobs; its poller is not started (chunks are run here by hand)."""
    registry = JobRegistry()
    registry.register(JOB_TYPE, ImportPasses(PassMaker(repo, artifacts, SystemClock())))
    return job_worker(repo, store, registry, relay=relay)


@pytest.fixture
def worker(repo: IssuerRepository, artifacts: WalletArtifacts, store: JobStore) -> JobWorker:
    return _import_worker(repo, artifacts, store)


async def _template(service: IssuerService) -> TemplateRecord:
    record = await service.handle(template_command())
    assert isinstance(record, TemplateRecord)
    return record


async def _job(service: IssuerService, command: Any) -> JobRecord:
    record = await service.handle(command)
    assert isinstance(record, JobRecord)
    return record


def _rows(first: int, count: int, bad: dict[int, dict[str, Any]] | None = None) -> list[ImportRow]:
    rows = []
    for number in range(first, first + count):
        fields = (bad or {}).get(number, {"field_values": {"seat": f"S{number}"}})
        rows.append(ImportRow(row=number, holder_name=f"Holder {number}", **fields))
    return rows


async def _rows_kept(store: JobStore, job_id: str) -> list[dict[str, Any]]:
    """What the job's chunks still hold of their rows beyond the row numbers."""
    kept = []
    async for chunk in store.chunks_of(job_id):
        kept += [i for i in chunk.get("items", []) if isinstance(i, dict) and set(i) - {"row"}]
    return kept


async def _upload(
    service: IssuerService,
    template_id: str,
    chunks: list[list[ImportRow]],
    reserved: int = 0,
    reserved_at: datetime | None = None,
) -> JobRecord:
    """An import's upload (one command per two chunks) and its start, as the api sends them
    (`reserved`: the units of the quota the api reserved for its good rows)."""
    job_id = new_id("job")
    request = command_base()["command_id"]
    numbered = [ImportChunk(seq=seq, rows=rows) for seq, rows in enumerate(chunks)]
    for n in range(0, len(numbered), 2):
        await _job(
            service,
            AddImportRows(
                **{**command_base(), "command_id": f"{request}.rows.{n}"},
                job_id=job_id,
                template_id=template_id,
                reserved=reserved,
                reserved_at=reserved_at,
                chunks=numbered[n : n + 2],
            ),
        )
    total = sum(len(rows) for rows in chunks)
    return await _job(
        service,
        StartJob(
            **{**command_base(), "command_id": f"{request}.start"}, job_id=job_id, total=total
        ),
    )


async def _claim(
    store: JobStore, owner: str = "test/1", later: timedelta = timedelta()
) -> list[Chunk]:
    return await claim_chunks(store, owner, later)


async def _results(repo: IssuerRepository, job_id: str) -> list[JobRowOutcome]:
    reads = JobReads(repo.db)
    job = await reads.job(ACCOUNT, "test", job_id)
    assert job is not None
    return [outcome async for chunk in reads.results(job) for outcome in chunk]


async def test_an_import_is_uploaded_started_and_worked_chunk_by_chunk(
    service: IssuerService, worker: JobWorker, store: JobStore, repo: IssuerRepository
) -> None:
    template = await _template(service)
    first = _rows(1, 100, bad={7: {"field_values": {"nope": "x"}}})
    first[41] = ImportRow(row=42, error=PRE_FAILED)  # refused by the api (past the quota)
    job = await _upload(service, template.id, [first, _rows(101, 100), _rows(201, 50)])
    assert (job.status, job.total, job.processed) == ("queued", 250, 0)
    assert await repo.passes.count_documents({}) == 0  # nothing is made before a worker runs

    chunks = await _claim(store)
    assert [chunk.seq for chunk in chunks] == [0, 1, 2]
    assert [await worker.run_chunk(chunk, "test/1") for chunk in chunks] == [True] * 3

    done = await store.job(ACCOUNT, "test", job.id)
    assert done is not None
    assert (done.status, done.processed, done.succeeded, done.failed) == (
        "succeeded",
        250,
        248,
        2,
    )
    assert done.finished_at is not None
    assert [(e.row, e.error.param or e.error.code) for e in done.errors] == [
        (7, "field_values.nope"),
        (42, "quota_exceeded"),
    ]
    results = await _results(repo, job.id)
    assert [outcome.row for outcome in results] == list(range(1, 251))
    made = [outcome for outcome in results if outcome.error is None]
    stored = {doc["_id"]: doc async for doc in repo.passes.find({}, {"short_id": 1})}
    assert {o.pass_id: o.short_id for o in made} == {k: v["short_id"] for k, v in stored.items()}
    assert len(await outbox_messages(repo.db["outbox"])) == 248  # one created event per pass
    # A chunk's events are one outbox document: one insert, one delete once published.
    assert await repo.db["outbox"].count_documents({}) == 3
    assert await _claim(store) == []


async def test_a_chunk_done_twice_after_its_lease_ran_out_creates_nothing_twice(
    service: IssuerService, worker: JobWorker, store: JobStore, repo: IssuerRepository
) -> None:
    template = await _template(service)
    job = await _upload(service, template.id, [_rows(1, 40)])
    [stale] = await _claim(store, "replica-a/1")
    # replica-a pauses past its lease; replica-b takes the chunk over and both finish it.
    [taken] = await _claim(store, "replica-b/1", later=LEASE + timedelta(seconds=1))
    assert taken.id == stale.id
    assert taken.attempts == 2

    outcomes = await asyncio.gather(
        worker.run_chunk(stale, "replica-a/1"), worker.run_chunk(taken, "replica-b/1")
    )

    assert list(outcomes) == [False, True]  # only the lease holder commits
    assert await repo.passes.count_documents({}) == 40
    assert len(await outbox_messages(repo.db["outbox"])) == 40
    done = await store.job(ACCOUNT, "test", job.id)
    assert done is not None
    assert (done.processed, done.succeeded, done.status) == (
        40,
        40,
        "succeeded",
    )


async def test_chunks_of_one_job_committing_at_once_are_all_counted(
    service: IssuerService, worker: JobWorker, store: JobStore
) -> None:
    template = await _template(service)
    job = await _upload(service, template.id, [_rows(n * 20 + 1, 20) for n in range(6)])
    chunks = await _claim(store)
    assert all(await asyncio.gather(*(worker.run_chunk(c, "test/1") for c in chunks)))
    done = await store.job(ACCOUNT, "test", job.id)
    assert done is not None
    assert (done.processed, done.succeeded, done.status) == (
        120,
        120,
        "succeeded",
    )


async def test_cancel_stops_taking_chunks_and_keeps_what_is_done(
    service: IssuerService, worker: JobWorker, store: JobStore, repo: IssuerRepository
) -> None:
    template = await _template(service)
    past_quota = {"error": row_error(InvalidRequest("No quota left.", code="quota_exceeded"))}
    chunks = [_rows(1, 10), _rows(11, 10), _rows(21, 10, {30: past_quota})]
    # Reserved by the api on the last day of the month: a cancel gives back to that month.
    reserved_at = datetime(2026, 1, 31, 23, 59, 59, 900_000, tzinfo=UTC)
    job = await _upload(service, template.id, chunks, reserved=29, reserved_at=reserved_at)
    assert job.reserved_at == reserved_at
    first, in_flight, _ = await _claim(store)
    assert await worker.run_chunk(first, "test/1")

    answer = await service.handle(CancelJob(**command_base(), job_id=job.id))

    assert isinstance(answer, JobCanceled)
    canceled = answer.job
    assert canceled.status == "canceled"
    assert canceled.finished_at is not None
    # The good rows that will never run (the chunk in flight's and the last one's) give their
    # units back; the row past the quota had none.
    assert answer.released == 19
    assert not await worker.run_chunk(in_flight, "test/1")  # taken before: not committed
    assert await _claim(store, later=LEASE * 2) == []
    stored = await store.job(ACCOUNT, "test", job.id)
    assert stored is not None
    assert (stored.status, stored.processed) == ("canceled", 10)
    assert await repo.passes.count_documents({}) == 10
    results = await _results(repo, job.id)
    assert [o.row for o in results] == list(range(1, 31))
    assert {o.error.code for o in results[10:] if o.error} == {"job_canceled"}
    # The rows that will never run keep their numbers, not the holders' data.
    assert await _rows_kept(store, job.id) == []
    again = await service.handle(CancelJob(**command_base(), job_id=job.id))
    assert isinstance(again, JobCanceled)
    assert (again.job.status, again.released) == ("canceled", 0)  # nothing given back twice


async def test_an_upload_that_never_finishes_fails_the_job_after_the_timeout(
    service: IssuerService, store: JobStore
) -> None:
    template = await _template(service)
    job_id = new_id("job")
    add = AddImportRows(
        **command_base(),
        job_id=job_id,
        template_id=template.id,
        chunks=[ImportChunk(seq=0, rows=_rows(1, 5))],
    )
    await _job(service, add)
    now = SystemClock().now()
    assert await store.expire_uploads(now - timedelta(hours=1), now) == []
    assert await store.expire_uploads(now + timedelta(seconds=1), now) == [job_id]

    failed = await store.job(ACCOUNT, "test", job_id)
    assert failed is not None
    assert failed.status == "failed"
    assert [e.error.code for e in failed.errors] == ["job_upload_incomplete"]
    assert await _rows_kept(store, job_id) == []
    with pytest.raises(InvalidRequest) as closed:
        await service.handle(add.model_copy(update={"command_id": "another"}))
    assert closed.value.code == "job_upload_closed"
    started = await _job(service, StartJob(**command_base(), job_id=job_id, total=5))
    assert started.status == "failed"  # a late start changes nothing
    assert await _claim(store) == []


async def test_an_import_of_an_unknown_or_archived_template_creates_no_job(
    service: IssuerService, store: JobStore
) -> None:
    archived = await _template(service)
    await service.handle(archive_command(archived.id))
    for template_id, refused in (
        ("tmpl_0000000000000000000000", NotFound),
        (archived.id, InvalidRequest),
    ):
        with pytest.raises(refused) as error:
            await service.handle(
                AddImportRows(
                    **command_base(),
                    job_id=new_id("job"),
                    template_id=template_id,
                    chunks=[ImportChunk(seq=0, rows=_rows(1, 1))],
                )
            )
        assert error.value.param == "template_id"
    assert await store.jobs.count_documents({}) == 0
    assert await store.chunks.count_documents({}) == 0


async def test_an_upload_begun_before_its_template_was_archived_finishes_and_its_rows_fail(
    service: IssuerService, worker: JobWorker, store: JobStore, repo: IssuerRepository
) -> None:
    """An import's upload spans commands; a template archived between two of them (or before a
    retry resends the rest) refused the next command, so the job stayed uploading for an hour
    and then failed as incomplete. The upload finishes; the rows fail as a started job's do."""
    template = await _template(service)
    job_id = new_id("job")
    request = command_base()["command_id"]

    def add(n: int, rows: list[ImportRow]) -> AddImportRows:
        return AddImportRows(
            **{**command_base(), "command_id": f"{request}.rows.{n}"},
            job_id=job_id,
            template_id=template.id,
            chunks=[ImportChunk(seq=n, rows=rows)],
        )

    await _job(service, add(0, _rows(1, 2)))
    await service.handle(archive_command(template.id))
    await _job(service, add(1, _rows(3, 2)))
    start = StartJob(**{**command_base(), "command_id": f"{request}.start"}, job_id=job_id, total=4)
    assert (await _job(service, start)).status == "queued"

    chunks = await _claim(store)
    assert [await worker.run_chunk(chunk, "test/1") for chunk in chunks] == [True, True]
    done = await store.job(ACCOUNT, "test", job_id)
    assert done is not None
    assert (done.status, done.failed) == ("failed", 4)
    outcomes = await _results(repo, job_id)
    assert [(o.row, o.error and o.error.code) for o in outcomes] == [
        (number, "template_archived") for number in range(1, 5)
    ]
    assert await repo.passes.count_documents({}) == 0


async def test_a_chunk_that_keeps_failing_is_given_up_and_the_job_goes_on(
    service: IssuerService, worker: JobWorker, store: JobStore, repo: IssuerRepository
) -> None:
    template = await _template(service)
    job = await _upload(service, template.id, [_rows(1, 3)])
    [chunk] = await _claim(store)
    worn = chunk.model_copy(update={"attempts": MAX_CHUNK_ATTEMPTS + 1})
    assert await worker.run_chunk(worn, "test/1")
    done = await store.job(ACCOUNT, "test", job.id)
    assert done is not None
    assert (done.status, done.failed) == ("failed", 3)
    assert {e.error.code for e in done.errors} == {"job_chunk_failed"}
    assert await repo.passes.count_documents({}) == 0


class _AlwaysChanged:
    """A job handler whose passes another command changes every time it prepares them."""

    def __init__(self) -> None:
        self.preparations = 0

    async def run(self, job: JobRecord, chunk: Chunk) -> ChunkResult:
        self.preparations += 1
        raise ConcurrentUpdate(chunk.id)


async def _held(store: JobStore, chunk: Chunk) -> dict[str, Any]:
    held = await store.chunks.find_one({"_id": chunk.id})
    assert held is not None
    lease_until = held["lease_until"].replace(tzinfo=UTC)
    # Given back to be claimed again soon, not left leased for its whole minute.
    assert lease_until - datetime.now(UTC) < timedelta(seconds=RETRY_SOON_SECONDS + 1)
    return held


async def test_a_chunk_whose_passes_keep_changing_is_given_back_soon_uncounted(
    service: IssuerService, store: JobStore, repo: IssuerRepository
) -> None:
    """Another command changes the chunk's passes every time it is prepared (a burst of
    PATCHes): given back for a claim in seconds, this claim not counted as an attempt."""
    template = await _template(service)
    await _upload(service, template.id, [_rows(1, 3)])
    [chunk] = await _claim(store)
    changing = _AlwaysChanged()
    registry = JobRegistry()
    registry.register(JOB_TYPE, changing)

    assert await job_worker(repo, store, registry).run_chunk(chunk, "test/1") is False

    assert changing.preparations == MAX_PREPARES
    assert (await _held(store, chunk))["attempts"] == chunk.attempts - 1


async def test_a_chunk_too_slow_to_commit_is_given_back_soon_and_counted(
    service: IssuerService,
    worker: JobWorker,
    store: JobStore,
    repo: IssuerRepository,
    artifacts: WalletArtifacts,
) -> None:
    """Every preparation older than a commit allows (a store too loaded): given back soon, and
    counted, so a store that never gets fast enough ends in the chunk given up, not retried
    forever; the next claim, fast enough, does it."""
    template = await _template(service)
    job = await _upload(service, template.id, [_rows(1, 3)])
    [chunk] = await _claim(store)
    registry = JobRegistry()
    registry.register(JOB_TYPE, ImportPasses(PassMaker(repo, artifacts, SystemClock())))
    aging = job_worker(repo, store, registry, max_prepared_age_seconds=-1.0)

    assert await aging.run_chunk(chunk, "test/1") is False

    assert (await _held(store, chunk))["attempts"] == chunk.attempts
    assert await repo.passes.count_documents({}) == 0
    [again] = await _claim(store, later=timedelta(seconds=RETRY_SOON_SECONDS + 0.5))
    assert again.attempts == chunk.attempts + 1
    assert await worker.run_chunk(again, "test/1")
    done = await store.job(ACCOUNT, "test", job.id)
    assert done is not None
    assert (done.status, done.succeeded) == ("succeeded", 3)


async def test_a_chunk_committed_but_never_counted_is_counted_once_by_the_sweep(
    service: IssuerService, repo: IssuerRepository, store: JobStore, artifacts: WalletArtifacts
) -> None:
    """A replica dies between a chunk's commit and its counting: any replica's sweep counts it,
    and only once (a second sweep, or the first replica coming back, changes nothing)."""
    clock = ManualClock()
    registry = JobRegistry()
    registry.register(JOB_TYPE, ImportPasses(PassMaker(repo, artifacts, clock)))
    worker = job_worker(repo, store, registry, clock=clock)
    template = await _template(service)
    job = await _upload(service, template.id, [_rows(1, 5), _rows(6, 5)])
    first, second = await _claim(store)
    handler = registry.handler(JOB_TYPE)
    assert handler is not None
    job_record = await store.job_by_id(job.id)
    assert job_record is not None
    # The work of the first chunk commits; its replica dies before counting it.
    assert await worker._commit_once(first, "test/1", await handler.run(job_record, first))
    assert await worker.run_chunk(second, "test/1")
    counted = await store.job(ACCOUNT, "test", job.id)
    assert counted is not None
    assert (counted.processed, counted.finished_at) == (5, None)
    assert (await store.chunks.find_one({"_id": first.id}) or {})["state"] == "counting"

    clock.advance(60)
    await worker._count_left_behind()
    await worker._count_left_behind()  # rate-limited, and nothing left anyway
    await worker._count(first.id, job.id, [])  # the dead replica's count, had it come back

    done = await store.job(ACCOUNT, "test", job.id)
    assert done is not None
    assert (done.processed, done.succeeded, done.status) == (10, 10, "succeeded")
    assert await repo.passes.count_documents({}) == 10


async def test_a_committed_chunk_publishes_its_events_itself_without_a_relay_claim(
    service: IssuerService,
    repo: IssuerRepository,
    artifacts: WalletArtifacts,
    store: JobStore,
    nats_url: str,
) -> None:
    """A chunk's events are written under the relay's committed lease and published by the
    worker right after the commit, then deleted: the relay's claims (never run here) take
    no part, which saves them their lease, read and scan of the outbox."""
    published: Counter[str] = Counter()

    async def count(msg: Msg) -> None:
        published[(msg.headers or {}).get("Nats-Msg-Id", "")] += 1

    listener = await nats.connect(nats_url)
    await listener.subscribe("tessera.events.>", cb=count)
    await listener.flush()
    broker = create_broker(nats_url)
    await broker.connect()
    try:
        await ensure_events_stream(broker)
        relay = OutboxRelay(repo.outbox, broker, poll_seconds=3600, owner="replica-1")
        worker = _import_worker(repo, artifacts, store, relay)
        template = await _template(service)
        await _upload(service, template.id, [_rows(1, 50)])
        [chunk] = await _claim(store)
        assert await worker.run_chunk(chunk, "test/1")
        pass_ids = [doc["_id"] async for doc in repo.passes.find({}, {"_id": 1})]
        assert len(pass_ids) == 50

        deadline = asyncio.get_running_loop().time() + 10
        while await repo.outbox.documents.count_documents({}) or sum(published.values()) < 50:
            assert asyncio.get_running_loop().time() < deadline, (published, pass_ids)
            await asyncio.sleep(0.05)
        await relay.stop()
    finally:
        await broker.stop()
        await listener.drain()
    assert len(published) == 50
    assert set(published.values()) == {1}  # each once


async def test_a_jobs_errors_are_its_first_rows_whatever_order_its_chunks_are_counted_in(
    service: IssuerService, store: JobStore, worker: JobWorker
) -> None:
    """Chunks run at once on every replica: a later chunk counted first must not take the
    places of the earlier rows' errors (`errors` holds the first 100, by row)."""
    template = await _template(service)
    job = await _upload(service, template.id, [_rows(1, 150), _rows(151, 150)])
    first, second = await _claim(store)
    await store.chunks.update_many({}, {"$set": {"state": "counting"}})
    bad = row_error(InvalidRequest("Bad row.", param="holder_name"))

    for chunk, rows in ((second, range(151, 301)), (first, range(1, 151))):
        await worker._count(chunk.id, job.id, [JobRowOutcome(row=n, error=bad) for n in rows])

    done = await store.job(ACCOUNT, "test", job.id)
    assert done is not None
    assert (done.processed, done.failed) == (300, 300)
    assert [error.row for error in done.errors] == list(range(1, 101))
