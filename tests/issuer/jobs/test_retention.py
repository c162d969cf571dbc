"""Finished jobs and their chunks are deleted once past the retention (90 days by default,
JobStore.purge_finished, swept by shared/sweeper.py); running jobs and newer ones stay, with
their chunks."""

from datetime import UTC, datetime, timedelta

from services.issuer.jobs.store import JobStore, chunk_id
from shared.ids import new_id
from shared.models import JobRecord

NOW = datetime(2026, 11, 29, 12, tzinfo=UTC)


async def _job(store: JobStore, status: str, finished: datetime | None, chunks: int = 2) -> str:
    created = (finished or NOW) - timedelta(hours=1)
    record = JobRecord.model_validate(
        {
            "_id": new_id("job"),
            "account_id": "acct_1",
            "mode": "test",
            "type": "import_passes",
            "status": status,
            "created_at": created,
            "updated_at": finished or created,
            "finished_at": finished,
        }
    )
    await store.jobs.insert_one(record.to_document())
    for seq in range(chunks):
        await store.chunks.insert_one({"_id": chunk_id(record.id, seq), "state": "done"})
    return record.id


async def _chunks_of(store: JobStore, job_id: str) -> int:
    return len([doc async for doc in store.chunks_of(job_id)])


async def test_jobs_finished_before_the_cutoff_go_with_their_chunks(store: JobStore) -> None:
    old = NOW - timedelta(days=91)
    gone = [await _job(store, status, old) for status in ("succeeded", "failed", "canceled")]
    running = await _job(store, "running", None)
    recent = await _job(store, "succeeded", NOW - timedelta(days=89))
    assert await store.purge_finished(NOW - timedelta(days=90), batch=2) == 3
    assert [await store.job_by_id(job_id) for job_id in gone] == [None, None, None]
    assert [await _chunks_of(store, job_id) for job_id in gone] == [0, 0, 0]
    for kept in (running, recent):
        assert await store.job_by_id(kept) is not None
        assert await _chunks_of(store, kept) == 2
