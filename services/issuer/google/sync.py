"""The Google step: the Google Wallet class and object of each pass, upserted after the commit.

Issuing, updating, voiding or using up a pass marks it (`google_status` "pending",
`google_sync_due`) in the same write that stores its new version (WalletArtifacts.attach_google);
a template whose design changed marks its class due in `google_classes`. This worker, in every
issuer replica, leases what is due from MongoDB (shared/poller.py), upserts the class once per
design version and then the object (idempotent by id), and records "synced", or "failing" with
the error and a retry after an exponential backoff. So a Google error or outage never fails or
delays the Apple pass, and everything reaches Google once it answers again (at least once; an
object is upserted whole, so a repeat changes nothing). docs/google-wallet.md#the-google-step.
"""

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pymongo import ASCENDING
from pymongo.asynchronous.client_session import AsyncClientSession
from pymongo.asynchronous.database import AsyncDatabase

from services.issuer.artifacts import WalletArtifacts
from services.issuer.google.client import GoogleWalletError
from services.issuer.google.passes import sync_object, sync_template
from services.issuer.repository import IssuerRepository
from shared.clock import Clock
from shared.design import Design
from shared.metrics import GOOGLE_SYNCS
from shared.models import PassRecord, TemplateRecord
from shared.mongo import write_in_transaction
from shared.poller import Batch, Lease, Poller

log = logging.getLogger(__name__)

CLASSES_DUE_PER_CLAIM = 20
FIRST_RETRY_SECONDS = 1.0
STOP_GRACE_SECONDS = 5.0
_ERROR_CHARS = 500
# A pass's lease of the Google step, as `$unset` takes it.
_LEASE = {"google_lease_owner": "", "google_lease_until": ""}
WRITE_ATTEMPTS = 10
CONFLICT_BACKOFF_SECONDS = 0.02


@dataclass(frozen=True)
class Claimed:
    record: PassRecord
    attempts: int  # failed attempts before this one


class GoogleSyncStore:
    """The Google step's state: in the passes (what is due, its lease) and `google_classes`
    (per template: the design version its class was last upserted at, and whether a design
    change is due)."""

    def __init__(self, db: AsyncDatabase[dict[str, Any]]):
        self.passes = db["passes"]
        self.classes = db["google_classes"]

    async def ensure_indexes(self) -> None:
        await self.passes.create_index([("google_sync_due", ASCENDING)], sparse=True)
        await self.classes.create_index([("due", ASCENDING)], sparse=True)

    async def claim(
        self, now: datetime, lease_until: datetime, token: str, limit: int
    ) -> list[Claimed]:
        """Lease up to `limit` due passes, the longest waiting first. A pass is leased by one
        worker at a time, so two versions of one object never travel to Google at once."""
        free = {"google_sync_due": {"$lte": now}, "google_lease_until": {"$not": {"$gt": now}}}
        listed = self.passes.find(free, {"_id": 1}).sort("google_sync_due", ASCENDING)
        ids = [doc["_id"] async for doc in listed.limit(limit)]
        if not ids:
            return []
        leased = await self._write(
            lambda session: self.passes.update_many(
                {"_id": {"$in": ids}, **free},
                {"$set": {"google_lease_owner": token, "google_lease_until": lease_until}},
                session=session,
            )
        )
        if not leased:
            return []
        won = self.passes.find({"_id": {"$in": ids}, "google_lease_owner": token})
        return [
            Claimed(PassRecord.model_validate(doc), int(doc.get("google_attempts", 0)))
            async for doc in won
        ]

    async def synced(self, record: PassRecord, token: str, digest: str | None) -> bool:
        """The version sent is the pass's current one: synced (with the `digest` of the object
        sent), lease given back. False (the lease given back alone) when the pass changed
        meanwhile: its new version is due."""
        return await self._outcome(
            record,
            token,
            {
                "$set": {
                    "google_status": "synced",
                    "google_error": None,
                    "google_object_digest": digest,
                },
                # Absent, not null: the due index is sparse.
                "$unset": {**_LEASE, "google_attempts": "", "google_sync_due": ""},
            },
        )

    async def failed(self, record: PassRecord, token: str, error: str, retry_at: datetime) -> None:
        """The version sent failed: `failing`, tried again at `retry_at`. When the pass changed
        meanwhile, its new version is due as its command marked it (now): the lease alone is
        given back, not the old version's error and backoff (a void or a redaction waited up
        to the backoff's 300 s, labelled with an error it never met)."""
        await self._outcome(
            record,
            token,
            {
                "$set": {
                    "google_status": "failing",
                    "google_error": error[:_ERROR_CHARS],
                    "google_sync_due": retry_at,
                },
                "$inc": {"google_attempts": 1},
                "$unset": _LEASE,
            },
        )

    async def _outcome(self, record: PassRecord, token: str, update: dict[str, Any]) -> bool:
        """`update` on the pass, under this lease, if it is still at the version sent; else the
        lease given back alone. Whether the version sent was the current one."""
        matched = 0

        async def write(session: AsyncClientSession) -> None:
            nonlocal matched
            done = await self.passes.update_one(
                {"_id": record.id, "google_lease_owner": token, "version": record.version},
                update,
                session=session,
            )
            matched = done.matched_count
            if not matched:
                await self.passes.update_one(
                    {"_id": record.id, "google_lease_owner": token},
                    {"$unset": _LEASE},
                    session=session,
                )

        await self._write(write)
        return matched == 1

    async def _write(self, write: Callable[[AsyncClientSession], Awaitable[object]]) -> bool:
        """A write to passes or classes, which commands change in transactions: in a
        transaction of its own (shared/mongo.py write_in_transaction), tried again while a
        command's transaction holds the document; False if it still conflicts (a lease is
        then left to expire)."""
        for _ in range(WRITE_ATTEMPTS):
            if await write_in_transaction(self.passes.database.client, write):
                return True
            await asyncio.sleep(random.uniform(0, CONFLICT_BACKOFF_SECONDS))  # noqa: S311  # jitter
        return False

    async def class_version(self, template_id: str, issuer_id: str) -> int:
        """The design version of the template's class at Google under `issuer_id` (0: none
        known; a class synced under another issuer, or before the issuer was recorded, is not
        this one: an operator who moves to another Wallet issuer gets every class inserted
        there, where they were taken as sent and every object insert refused)."""
        doc = await self.classes.find_one(
            {"_id": template_id}, {"synced_version": 1, "synced_issuer": 1}
        )
        if doc is None or doc.get("synced_issuer") != issuer_id:
            return 0
        return int(doc.get("synced_version", 0))

    async def class_synced(self, template_id: str, issuer_id: str, design_version: int) -> None:
        async def write(session: AsyncClientSession) -> None:
            same = await self.classes.update_one(
                {"_id": template_id, "synced_issuer": issuer_id},
                {"$max": {"synced_version": design_version}},
                session=session,
            )
            if same.matched_count == 0:  # none yet, or under another issuer
                await self.classes.update_one(
                    {"_id": template_id},
                    {"$set": {"synced_issuer": issuer_id, "synced_version": design_version}},
                    upsert=True,
                    session=session,
                )

        await self._write(write)

    async def mark_class_due(
        self, template: TemplateRecord, now: datetime, session: AsyncClientSession
    ) -> None:
        """A design change (in the PATCH's transaction): the class is upserted even if no
        pass of the template changes in Google."""
        await self.classes.update_one(
            {"_id": template.id},
            {"$set": {"due": now, "account_id": template.account_id, "mode": template.mode}},
            upsert=True,
            session=session,
        )

    async def class_due_again(self, template: TemplateRecord, now: datetime) -> None:
        await self._write(lambda session: self.mark_class_due(template, now, session))

    async def classes_due(self, now: datetime, limit: int) -> list[dict[str, Any]]:
        cursor = self.classes.find({"due": {"$lte": now}}).sort("due", ASCENDING)
        return [doc async for doc in cursor.limit(limit)]

    async def class_done(self, doc: dict[str, Any], issuer_id: str, design_version: int) -> None:
        """Due no more, unless a newer change marked it due again meanwhile; and at Google at
        `design_version` under `issuer_id` (`class_synced`)."""
        await self._write(
            lambda session: self.classes.update_one(
                {"_id": doc["_id"], "due": doc["due"]}, {"$unset": {"due": ""}}, session=session
            )
        )
        await self.class_synced(doc["_id"], issuer_id, design_version)

    async def class_retry(self, doc: dict[str, Any], at: datetime) -> None:
        await self._write(
            lambda session: self.classes.update_one(
                {"_id": doc["_id"], "due": doc["due"]}, {"$set": {"due": at}}, session=session
            )
        )


class GoogleSyncer:
    """The worker of the Google step (run only with Google credentials)."""

    def __init__(
        self,
        store: GoogleSyncStore,
        repo: IssuerRepository,
        artifacts: WalletArtifacts,
        clock: Clock,
        *,
        concurrency: int,
        lease_seconds: float,
        poll_seconds: float,
        retry_max_seconds: float,
    ):
        self._store = store
        self._repo = repo
        self._artifacts = artifacts
        self._clock = clock
        self._lease = timedelta(seconds=lease_seconds)
        self._retry_max = retry_max_seconds
        # template id -> the design version whose class this process knows is at Google.
        self._classes: dict[str, int] = {}
        self._poller: Poller[Claimed] = Poller(
            "google-sync",
            self._claim,
            self._work,
            concurrency=concurrency,
            poll_seconds=poll_seconds,
        )

    def wake(self) -> None:
        """Something was marked due (a commit): claim now instead of at the next poll."""
        self._poller.wake()

    def start(self) -> None:
        self._poller.start()

    async def stop(self) -> None:
        await self._poller.stop(STOP_GRACE_SECONDS)

    def retry_delay(self, attempts: int) -> float:
        """1 s after the first failure, doubling up to `retry_max_seconds`."""
        return float(min(self._retry_max, FIRST_RETRY_SECONDS * 2 ** min(attempts, 20)))

    async def _claim(self, batch: Batch[Claimed]) -> list[Claimed]:
        await self._sync_due_classes()
        if batch.size <= 0:
            return []
        now = self._clock.now()
        return await self._store.claim(now, now + self._lease, batch.token, batch.size)

    async def _sync_due_classes(self) -> None:
        now = self._clock.now()
        for doc in await self._store.classes_due(now, CLASSES_DUE_PER_CLAIM):
            template = await self._repo.template(doc["account_id"], doc["mode"], doc["_id"])
            if template is None:
                continue
            try:
                await self._upsert_class(template)
            except GoogleWalletError as exc:
                log.warning("Google Wallet refused class of template %s: %s", template.id, exc)
                GOOGLE_SYNCS.labels(outcome="failed").inc()
                await self._store.class_retry(doc, now + timedelta(seconds=self._retry_max))
                continue
            issuer_id = self._artifacts.google.identity.issuer_id
            await self._store.class_done(doc, issuer_id, template.design_version)

    async def _work(self, claimed: Claimed, lease: Lease) -> None:
        record = claimed.record
        template = await self._repo.template(record.account_id, record.mode, record.template_id)
        if template is None:  # templates are archived, never deleted
            log.error("pass %s: its template %s is missing", record.id, record.template_id)
            return
        design = Design.from_stored(template.design)
        deadline = self._lease.total_seconds() / 2
        try:
            # Within half the lease: a step still under way when its lease ran out could land
            # its version at Google after another replica's newer one (several calls of 10 s
            # each, a token refresh included, outlast a 60 s lease).
            async with asyncio.timeout(deadline):
                await self._ensure_class(template)
                digest = await sync_object(
                    self._artifacts.google,
                    template,
                    record,
                    logo_url=self._artifacts.logo_url(template, design),
                )
        except (GoogleWalletError, TimeoutError) as exc:
            delay = self.retry_delay(claimed.attempts)
            error = str(exc) or f"no answer from Google within {deadline:g} s"
            log.warning(
                "Google Wallet did not take pass %s (attempt %d, next in %.0f s): %s",
                record.id,
                claimed.attempts + 1,
                delay,
                error,
            )
            GOOGLE_SYNCS.labels(outcome="failed").inc()
            retry_at = self._clock.now() + timedelta(seconds=delay)
            await self._store.failed(record, lease.token, error, retry_at)
            self._poller.wake(delay)
            return
        GOOGLE_SYNCS.labels(outcome="synced").inc()
        if not await self._store.synced(record, lease.token, digest):
            self._poller.wake()  # a newer version is due

    async def _ensure_class(self, template: TemplateRecord) -> None:
        """The template's class at Google at its current design version: upserted once per
        design version (this process remembers; the store tells the other replicas)."""
        if self._classes.get(template.id, 0) >= template.design_version:
            return
        issuer_id = self._artifacts.google.identity.issuer_id
        if await self._store.class_version(template.id, issuer_id) < template.design_version:
            await self._upsert_class(template)
            await self._store.class_synced(template.id, issuer_id, template.design_version)
        self._classes[template.id] = template.design_version

    async def _upsert_class(self, template: TemplateRecord) -> None:
        design = Design.from_stored(template.design)
        logo_url = self._artifacts.logo_url(template, design)
        await sync_template(self._artifacts.google, template, logo_url=logo_url)
        self._classes[template.id] = template.design_version
        # Class upserts are not leased: another replica may have sent a newer design version
        # while this one travelled, and this one may have landed last. A design newer than the
        # one sent, once this landed, makes the class due again (the newer design is sent).
        current = await self._repo.template(template.account_id, template.mode, template.id)
        if current is not None and current.design_version > template.design_version:
            await self._store.class_due_again(current, self._clock.now())
