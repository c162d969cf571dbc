"""Every MongoDB call on the issuer's `jobs` and `job_chunks` collections.

A chunk's `_id` is `<job id>:<seq>` (seq zero-padded), so chunks sort by job, oldest job first
(job ids are time-sortable), then in their order within the job; the results of a job are
read in `_id` order over that range, served by the `_id` index.
"""

import asyncio
import logging
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field
from pymongo import ASCENDING, DESCENDING, ReturnDocument
from pymongo.asynchronous.client_session import AsyncClientSession

from shared.models import (
    FINISHED_JOB_STATUSES,
    JobError,
    JobRecord,
    JobRowOutcome,
    JobType,
    RowError,
)
from shared.mongo import Database, Document, write_in_transaction

log = logging.getLogger(__name__)

# The first errors a job keeps (the rest are in its results).
MAX_JOB_ERRORS = 100
MARK_RUNNING_ATTEMPTS = 5
CONFLICT_BACKOFF_SECONDS = 0.02
# A chunk that will never run keeps its rows' numbers (its results list them as
# `job_canceled`) and nothing else of them: an import's row holds the holder's data
# (docs/privacy.md), which would otherwise stay for as long as the job. A rollout's items are
# pass ids (and its sweep's marker), kept as they are. An update pipeline: one write serves
# all the chunks.
CANCELED: list[dict[str, Any]] = [
    {
        "$set": {
            "state": "canceled",
            "items": {
                "$map": {
                    "input": {"$ifNull": ["$items", []]},
                    "as": "item",
                    "in": {
                        "$cond": [
                            {
                                "$and": [
                                    {"$eq": [{"$type": "$$item"}, "object"]},
                                    {"$ne": ["$$item.sweep", True]},  # SWEEP_ITEM, kept
                                ]
                            },
                            {"row": "$$item.row"},
                            "$$item",
                        ]
                    },
                }
            },
        }
    }
]

ChunkState = Literal["waiting", "pending", "counting", "done", "canceled"]
# "waiting": uploaded, the job not started yet; "pending": to do; "counting": its work
# committed, not yet counted into its job; then "done", or "canceled".


class Chunk(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="ignore")

    id: str = Field(alias="_id")
    job_id: str
    seq: int
    type: JobType
    state: ChunkState
    items: list[Any] = Field(default_factory=list)
    # Claims of this chunk so far, this one included: a chunk that keeps failing is given up.
    attempts: int = 0


# The one item of a rollout's last chunk: not a row or a pass id, but the sweep for passes made
# from the old design meanwhile (jobs/rollout.py). It has no outcome and never fails.
SWEEP_ITEM: Final[dict[str, Any]] = {"sweep": True}


def chunk_id(job_id: str, seq: int) -> str:
    return f"{job_id}:{seq:07d}"


def _free(now: datetime) -> Document:
    return {"state": "pending", "lease_until": {"$not": {"$gte": now}}}


def _job_range(job_id: str) -> Document:
    # ":" then ";" in ASCII: exactly the ids `<job id>:...`.
    return {"_id": {"$gt": f"{job_id}:", "$lt": f"{job_id};"}}


class JobStore:
    def __init__(self, db: Database):
        self.jobs = db["jobs"]
        self.chunks = db["job_chunks"]

    async def ensure_indexes(self) -> None:
        scope = [("account_id", ASCENDING), ("mode", ASCENDING)]
        await self.jobs.create_index([*scope, ("_id", DESCENDING)])
        await self.jobs.create_index([("status", ASCENDING), ("created_at", ASCENDING)])
        await self.chunks.create_index([("state", ASCENDING), ("_id", ASCENDING)])

    async def job(self, account_id: str, mode: str, job_id: str) -> JobRecord | None:
        doc = await self.jobs.find_one({"_id": job_id, "account_id": account_id, "mode": mode})
        return None if doc is None else JobRecord.model_validate(doc)

    async def job_by_id(self, job_id: str) -> JobRecord | None:
        doc = await self.jobs.find_one({"_id": job_id})
        return None if doc is None else JobRecord.model_validate(doc)

    # --- what commands write, inside their transaction ---------------------------------------

    async def open_upload(self, session: AsyncClientSession, record: JobRecord) -> JobRecord:
        """The job `record` describes, created "uploading" by the first of its uploads."""
        doc = await self.jobs.find_one_and_update(
            {"_id": record.id},
            {"$setOnInsert": record.to_document()},
            upsert=True,
            return_document=ReturnDocument.AFTER,
            session=session,
        )
        return JobRecord.model_validate(doc)

    async def insert_chunks(
        self,
        session: AsyncClientSession,
        job: JobRecord,
        chunks: Sequence[tuple[int, list[Any]]],
        state: ChunkState,
        now: datetime,
        *,
        not_before: datetime | None = None,
    ) -> None:
        """Chunks of `job`: (seq, items) each; with `not_before`, claimed from then on."""
        if not chunks:
            return
        documents = [
            {
                "_id": chunk_id(job.id, seq),
                "job_id": job.id,
                "seq": seq,
                "type": job.type,
                "state": state,
                "items": items,
                "attempts": 0,
                "created_at": now,
            }
            for seq, items in chunks
        ]
        if not_before is not None:
            for document in documents:
                document["lease_until"] = not_before
        await self.chunks.insert_many(documents, session=session)

    async def grow(self, session: AsyncClientSession, job_id: str, rows: int) -> None:
        """Count `rows` more to do into the job (a rollout's sweep found passes)."""
        await self.jobs.update_one({"_id": job_id}, {"$inc": {"total": rows}}, session=session)

    async def passes_done(self, job_id: str) -> set[str]:
        """The passes the job's chunks did (changed, skipped or failed) so far."""
        cursor = self.chunks.find(
            {**_job_range(job_id), "outcomes.pass_id": {"$exists": True}},
            {"outcomes.pass_id": 1},
        )
        return {
            outcome["pass_id"]
            async for doc in cursor
            for outcome in doc.get("outcomes", [])
            if outcome.get("pass_id")
        }

    async def others_open(self, job_id: str, chunk_id_: str) -> bool:
        """Whether a chunk of the job other than `chunk_id_` is still to do or to count."""
        return await self._any_chunk(job_id, ["pending", "counting"], other_than=chunk_id_)

    async def start(
        self, session: AsyncClientSession, job_id: str, total: int, now: datetime
    ) -> bool:
        """An uploading job queued with its `total`, its chunks released; False if it was not
        uploading any more (another start, a cancel)."""
        result = await self.jobs.update_one(
            {"_id": job_id, "status": "uploading"},
            {"$set": {"status": "queued", "total": total, "updated_at": now}},
            session=session,
        )
        if result.matched_count != 1:
            return False
        await self.chunks.update_many(
            {**_job_range(job_id), "state": "waiting"},
            {"$set": {"state": "pending"}},
            session=session,
        )
        return True

    async def cancel(
        self, session: AsyncClientSession, job_id: str, status: str, now: datetime
    ) -> int | None:
        """A job still in `status` canceled with its chunks not done yet; None if its status
        changed meanwhile, else how many rows without an error those chunks held (an import's
        rows that reserved a unit of the quota and will never run). A chunk's commit writes its
        chunk last, so a chunk being committed either commits first (and stays done) or finds
        itself canceled and writes nothing."""
        result = await self.jobs.update_one(
            {"_id": job_id, "status": status},
            {"$set": {"status": "canceled", "finished_at": now, "updated_at": now}},
            session=session,
        )
        if result.matched_count != 1:
            return None
        not_done = {**_job_range(job_id), "state": {"$in": ["waiting", "pending"]}}
        unrun = 0
        async for chunk in self.chunks.find(not_done, {"items.error": 1}, session=session):
            rows = [item for item in chunk.get("items", []) if isinstance(item, dict)]
            unrun += sum(1 for row in rows if row.get("error") is None)
        await self.chunks.update_many(not_done, CANCELED, session=session)
        return unrun

    async def insert_job(self, session: AsyncClientSession, record: JobRecord) -> None:
        """A job created whole by one command (a rollout, an update_passes job)."""
        await self.jobs.insert_one(record.to_document(), session=session)

    async def supersede(
        self, session: AsyncClientSession | None, job_id: str, by: str, now: datetime
    ) -> None:
        """An open job replaced by job `by` (a newer rollout of the same template): canceled,
        its chunks not done yet too, as `cancel` does; nothing if it is finished already."""
        result = await self.jobs.update_one(
            {"_id": job_id, "status": {"$in": ["queued", "running"]}},
            {
                "$set": {
                    "status": "canceled",
                    "params.superseded_by": by,
                    "finished_at": now,
                    "updated_at": now,
                }
            },
            session=session,
        )
        if result.matched_count == 1:
            await self.chunks.update_many(
                {**_job_range(job_id), "state": {"$in": ["waiting", "pending"]}},
                CANCELED,
                session=session,
            )

    async def retry_soon(
        self, chunk_id: str, token: str, at: datetime, *, counted: bool = False
    ) -> None:
        """Give a claimed chunk back, to be claimed again from `at`, without counting this
        claim as an attempt (its commit was held up, not failed) unless `counted`."""
        uncount: dict[str, Any] = {} if counted else {"$inc": {"attempts": -1}}
        # Not given back on a conflict (a cancel): the lease then expires as for a crash.
        await self._in_transaction(
            lambda session: self.chunks.update_one(
                {"_id": chunk_id, "lease_owner": token, "state": "pending"},
                {"$set": {"lease_until": at}, **uncount},
                session=session,
            )
        )

    async def drop_chunk(self, chunk_id: str, token: str) -> None:
        """A claimed chunk of a finished job: canceled, never worked."""
        await self._in_transaction(
            lambda session: self.chunks.update_one(
                {"_id": chunk_id, "lease_owner": token, "state": "pending"},
                [*CANCELED, {"$unset": "lease_until"}],
                session=session,
            )
        )

    # --- the worker --------------------------------------------------------------------------

    async def claim(
        self, now: datetime, lease_until: datetime, token: str, limit: int
    ) -> list[Chunk]:
        """Lease up to `limit` pending chunks, oldest job first. The update repeats the
        listing's condition, so of two claims listing the same chunks each goes to one."""
        cursor = self.chunks.find(_free(now), {"_id": 1}).sort("_id", ASCENDING).limit(limit)
        ids = [doc["_id"] async for doc in cursor]
        if not ids:
            return []
        leased = await self._in_transaction(
            lambda session: self.chunks.update_many(
                {"_id": {"$in": ids}, **_free(now)},
                {
                    "$set": {"lease_owner": token, "lease_until": lease_until},
                    "$inc": {"attempts": 1},
                },
                session=session,
            )
        )
        if not leased:
            return []  # a cancel or a commit holds some of them: the next claim tries again
        won = self.chunks.find({"_id": {"$in": ids}, "lease_owner": token})
        return [Chunk.model_validate(doc) async for doc in won.sort("_id", ASCENDING)]

    async def mark_running(self, job_ids: Sequence[str], now: datetime) -> None:
        for _ in range(MARK_RUNNING_ATTEMPTS):
            marked = await self._in_transaction(
                lambda session: self.jobs.update_many(
                    {"_id": {"$in": list(job_ids)}, "status": "queued"},
                    {"$set": {"status": "running", "started_at": now, "updated_at": now}},
                    session=session,
                )
            )
            if marked:
                return
            await asyncio.sleep(random.uniform(0, CONFLICT_BACKOFF_SECONDS))  # noqa: S311  # jitter
        log.warning("jobs %s: still conflicting, left queued until counted", list(job_ids))

    async def _in_transaction(
        self, write: Callable[[AsyncClientSession], Awaitable[object]]
    ) -> bool:
        return await write_in_transaction(self.jobs.database.client, write)

    async def job_open(self, session: AsyncClientSession, job_id: str) -> bool:
        """Whether the job still takes work (queued or running), read in the transaction."""
        doc = await self.jobs.find_one(
            {"_id": job_id, "status": {"$in": ["queued", "running"]}}, {"_id": 1}, session=session
        )
        return doc is not None

    async def finish_chunk(
        self,
        session: AsyncClientSession,
        chunk: Chunk,
        token: str,
        outcomes: Sequence[JobRowOutcome],
        now: datetime,
    ) -> bool:
        """The chunk done with its outcomes, to be counted ("counting"), in the caller's
        transaction: only under the chunk's lease and while it is pending. False (abort the
        transaction) when another claim took it over or it was canceled."""
        done = await self.chunks.update_one(
            {"_id": chunk.id, "lease_owner": token, "state": "pending"},
            {
                "$set": {
                    "state": "counting",
                    "outcomes": [outcome.model_dump(exclude_none=True) for outcome in outcomes],
                    "done_at": now,
                },
                "$unset": {"items": "", "lease_until": ""},
            },
            session=session,
        )
        return done.matched_count == 1

    async def count(
        self,
        session: AsyncClientSession,
        chunk_id: str,
        job_id: str,
        outcomes: Sequence[JobRowOutcome],
        now: datetime,
    ) -> bool:
        """A chunk that is done ("counting") counted into its job, in one transaction with
        the chunk's move to "done", so it is counted once (False: it was counted already).
        The job's counters only grow, its first errors are kept, and it is finished when
        every row is processed."""
        moved = await self.chunks.update_one(
            {"_id": chunk_id, "state": "counting"},
            {"$set": {"state": "done", "counted_at": now}},
            session=session,
        )
        if moved.matched_count != 1:
            return False
        failed = [o for o in outcomes if o.error is not None]
        errors = [
            JobError(row=o.row, pass_id=o.pass_id, error=o.error).model_dump(exclude_none=True)
            for o in failed[:MAX_JOB_ERRORS]
            if o.error is not None
        ]
        update: Document = {
            "$inc": {
                "processed": len(outcomes),
                "succeeded": len(outcomes) - len(failed),
                "failed": len(failed),
            },
            "$set": {"updated_at": now},
        }
        if errors:
            # The first ones by row (or by pass id, which sorts by creation), whatever order
            # the job's chunks are counted in: chunks run at once on every replica.
            update["$push"] = {
                "errors": {
                    "$each": errors,
                    "$sort": {"row": 1, "pass_id": 1},
                    "$slice": MAX_JOB_ERRORS,
                }
            }
        job = await self.jobs.find_one_and_update(
            {"_id": job_id}, update, return_document=ReturnDocument.AFTER, session=session
        )
        if job is None or job["status"] not in ("queued", "running"):
            return True
        # A chunk still to do may count no row in `total`: a rollout's sweep.
        if int(job["processed"]) >= int(job["total"]) and not await self._any_chunk(
            job_id, ["pending"], session=session
        ):
            status = "succeeded" if int(job["succeeded"]) or not int(job["total"]) else "failed"
            await self.jobs.update_one(
                {"_id": job_id},
                {"$set": {"status": status, "finished_at": now}},
                session=session,
            )
        return True

    async def _any_chunk(
        self,
        job_id: str,
        states: Sequence[ChunkState],
        *,
        other_than: str | None = None,
        session: AsyncClientSession | None = None,
    ) -> bool:
        """Whether a chunk of the job (other than `other_than`) is in one of `states`."""
        query: Document = {**_job_range(job_id), "state": {"$in": list(states)}}
        if other_than is not None:
            query["_id"] = {**query["_id"], "$ne": other_than}
        doc = await self.chunks.find_one(query, {"_id": 1}, session=session)
        return doc is not None

    async def uncounted(self, before: datetime) -> list[Document]:
        """Chunks done before `before` and still not counted (their replica died in between)."""
        cursor = self.chunks.find(
            {"state": "counting", "done_at": {"$lt": before}},
            {"job_id": 1, "outcomes": 1},
        )
        return [doc async for doc in cursor.limit(100)]

    async def expire_uploads(self, before: datetime, now: datetime) -> list[str]:
        """Fail the jobs whose upload began before `before` and never finished."""
        cursor = self.jobs.find({"status": "uploading", "created_at": {"$lt": before}}, {"_id": 1})
        ids = [doc["_id"] async for doc in cursor]
        if not ids:
            return []
        error = RowError(
            status=400,
            type="invalid_request_error",
            code="job_upload_incomplete",
            message="The job's rows never finished uploading; send the request again.",
        )
        await self.jobs.update_many(
            {"_id": {"$in": ids}, "status": "uploading"},
            {
                "$set": {
                    "status": "failed",
                    "finished_at": now,
                    "updated_at": now,
                    "errors": [JobError(error=error).model_dump(exclude_none=True)],
                }
            },
        )
        for job_id in ids:
            await self.chunks.update_many({**_job_range(job_id), "state": "waiting"}, CANCELED)
        return ids

    async def purge_finished(self, before: datetime, batch: int = 100) -> int:
        """Delete the jobs that finished before `before`, their chunks (rows' outcomes, the
        results) first: a crash between the two leaves the job, and the next sweep ends it.
        Read by (status, created_at): a job finishes after it was created. How many."""
        purged = 0
        while True:
            old = {
                "status": {"$in": sorted(FINISHED_JOB_STATUSES)},
                "created_at": {"$lt": before},
                "finished_at": {"$lt": before},
            }
            ids = [doc["_id"] async for doc in self.jobs.find(old, {"_id": 1}).limit(batch)]
            for job_id in ids:
                await self.chunks.delete_many(_job_range(job_id))
            if ids:
                purged += (await self.jobs.delete_many({"_id": {"$in": ids}})).deleted_count
            if len(ids) < batch:
                return purged

    # --- reads -------------------------------------------------------------------------------

    async def chunks_of(self, job_id: str) -> AsyncIterator[Document]:
        """The job's chunks in order, without the input items of those done."""
        cursor = self.chunks.find(_job_range(job_id), {"lease_owner": 0, "lease_until": 0})
        async for doc in cursor.sort("_id", ASCENDING):
            yield doc
