"""Every MongoDB call of the webhooks service: subscriptions and their deliveries."""

import json
import secrets
from collections.abc import Collection
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from pymongo import ASCENDING, DESCENDING, UpdateOne
from pymongo.errors import BulkWriteError, DuplicateKeyError

from services.webhooks.payload import compact_json
from shared.ids import first_id_at
from shared.models import FINISHED_DELIVERY_STATUSES, DeliveryRecord, WebhookRecord
from shared.mongo import Database, duplicates_only
from shared.redaction import erase_pass_data

PROCESSED_COMMAND_TTL = timedelta(hours=48)
# The `webhooks_migrations` entry of the deliveries' pass_id backfill.
BACKFILL_MIGRATION = "delivery_pass_id"
BACKFILL_BATCH = 500
# What inserting a webhook came to: stored; beaten by a replay of the same create command; or
# beaten to its slot by another create of the same account and mode.
Inserted = Literal["inserted", "duplicate_command", "slot_taken"]


class WebhookRepository:
    def __init__(self, db: Database):
        self.webhooks = db["webhooks"]
        self.deliveries = db["webhook_deliveries"]
        self.processed = db["webhook_commands"]
        self.migrations = db["webhooks_migrations"]

    async def ensure_indexes(self) -> None:
        scope = [("account_id", ASCENDING), ("mode", ASCENDING)]
        await self.webhooks.create_index([*scope, ("_id", DESCENDING)])
        await self.webhooks.create_index([*scope, ("enabled", ASCENDING)])
        # One webhook per create command, even when two replicas run a replay of it at once.
        await self.webhooks.create_index("command_id", unique=True, sparse=True)
        # Each webhook holds one of its account and mode's numbered slots, so the cap holds
        # exactly under concurrent creates on any number of replicas, and a delete frees its
        # slot with the webhook itself (no counter to drift). Partial as first created: an
        # index's options cannot change in place.
        await self.webhooks.create_index(
            [*scope, ("slot", ASCENDING)],
            unique=True,
            partialFilterExpression={"slot": {"$exists": True}},
        )
        # One delivery per (webhook, event): a redelivered event creates nothing new.
        await self.deliveries.create_index(
            [("webhook_id", ASCENDING), ("event_id", ASCENDING)], unique=True
        )
        await self.deliveries.create_index([("webhook_id", ASCENDING), ("_id", DESCENDING)])
        await self.deliveries.create_index([("status", ASCENDING), ("next_attempt_at", ASCENDING)])
        await self.deliveries.create_index("manual_at", sparse=True)
        await self.deliveries.create_index("pass_id", sparse=True)
        await self.deliveries.create_index("erased_at", sparse=True)
        await self.processed.create_index("expires_at", expireAfterSeconds=0)

    # -- subscriptions -------------------------------------------------------------------------

    async def free_slot(self, account_id: str, mode: str, limit: int) -> int | None:
        """A slot below `limit` that no webhook of the account and mode holds, or None when
        they have `limit` webhooks. Picked at random among the free ones, so concurrent creates
        rarely collide."""
        cursor = self.webhooks.find({"account_id": account_id, "mode": mode}, {"slot": 1})
        used = {int(doc["slot"]) async for doc in cursor}
        if len(used) >= limit:  # also when the limit was lowered below the count
            return None
        free = [slot for slot in range(limit) if slot not in used]
        return secrets.choice(free) if free else None

    async def insert(self, record: WebhookRecord, command_id: str | None, slot: int) -> Inserted:
        """Store a webhook in `slot` (from `free_slot`): every webhook holds one, so the cap is
        exact."""
        document = record.to_document() | {"slot": slot}
        if command_id is not None:
            document["command_id"] = command_id
        try:
            await self.webhooks.insert_one(document)
        except DuplicateKeyError as exc:
            pattern = (exc.details or {}).get("keyPattern") or {}
            if "slot" in pattern:
                return "slot_taken"
            if "command_id" in pattern:
                return "duplicate_command"
            if command_id is None:
                return "slot_taken"
            # A store that does not say which index refused: the command's webhook tells.
            mine = await self.webhooks.find_one({"command_id": command_id}, {"_id": 1})
            return "slot_taken" if mine is None else "duplicate_command"
        return "inserted"

    async def by_command(self, command_id: str) -> WebhookRecord | None:
        doc = await self.webhooks.find_one({"command_id": command_id})
        return None if doc is None else WebhookRecord.model_validate(doc)

    async def get(self, account_id: str, mode: str, webhook_id: str) -> WebhookRecord | None:
        doc = await self.webhooks.find_one(
            {"_id": webhook_id, "account_id": account_id, "mode": mode}
        )
        return None if doc is None else WebhookRecord.model_validate(doc)

    async def by_id(self, webhook_id: str) -> WebhookRecord | None:
        doc = await self.webhooks.find_one({"_id": webhook_id})
        return None if doc is None else WebhookRecord.model_validate(doc)

    async def update_fields(
        self, webhook_id: str, changes: dict[str, Any], *, enabled: bool | None = None
    ) -> bool:
        """Set these fields of the webhook, and only these; with `enabled`, only while it is
        still enabled or disabled as the caller read it. Whether it was written."""
        query: dict[str, Any] = {"_id": webhook_id}
        if enabled is not None:
            query["enabled"] = enabled
        result = await self.webhooks.update_one(query, {"$set": changes})
        return result.matched_count == 1

    async def delete(self, webhook_id: str) -> None:
        """Hard delete: its history (which also ends its pending retries), then the webhook.
        In that order, so a crash between the two leaves the webhook, whose DELETE retried
        does both, not its history with no webhook to delete it by (a delivery a fan-out
        stores between them is dropped at its attempt, or ends in the retention sweep)."""
        await self.deliveries.delete_many({"webhook_id": webhook_id})
        await self.webhooks.delete_one({"_id": webhook_id})

    async def purge_finished(self, before: datetime) -> int:
        """Delete the deliveries that are over (delivered or dead) and whose event came before
        `before` (docs/webhooks.md#retention): read by `_id`, whose time is the event's. Not
        one a resend or recover asked for (`manual_at`), or one held by a replica (its attempt
        would find it gone): they go at a later sweep."""
        result = await self.deliveries.delete_many(
            {
                "_id": {"$lt": first_id_at("webhook_delivery", int(before.timestamp() * 1000))},
                "status": {"$in": list(FINISHED_DELIVERY_STATUSES)},
                "manual_at": None,
                "lease_owner": None,
            }
        )
        return result.deleted_count

    async def deliverable(self, account_id: str, mode: str) -> list[WebhookRecord]:
        """Every webhook of the account and mode that events may be fanned out to, whatever
        it subscribes to: the enabled ones, and those disabled for failing."""
        cursor = self.webhooks.find(
            {
                "account_id": account_id,
                "mode": mode,
                "$or": [{"enabled": True}, {"disabled_reason": "failing"}],
            }
        )
        return [WebhookRecord.model_validate(doc) async for doc in cursor]

    async def count_failing(self) -> int:
        """Enabled webhooks whose attempts have all failed since some time (a gauge)."""
        return await self.webhooks.count_documents(
            {"enabled": True, "failing_since": {"$ne": None}}
        )

    async def count_auto_disabled(self) -> int:
        """Webhooks Tessera disabled for failing (a gauge)."""
        return await self.webhooks.count_documents({"disabled_reason": "failing", "enabled": False})

    # -- processed commands (a retried command answers its first result) ----------------------

    async def processed_result(self, command_id: str) -> dict[str, Any] | None:
        doc = await self.processed.find_one({"_id": command_id})
        return None if doc is None else dict(doc["result"])

    async def record_command(self, command_id: str, result: dict[str, Any], at: datetime) -> bool:
        """False when the same command was recorded first by a concurrent replay."""
        try:
            await self.processed.insert_one(
                {"_id": command_id, "result": result, "expires_at": at + PROCESSED_COMMAND_TTL}
            )
        except DuplicateKeyError:
            return False
        return True

    # -- deliveries ----------------------------------------------------------------------------

    async def delivery(self, delivery_id: str) -> DeliveryRecord | None:
        doc = await self.deliveries.find_one({"_id": delivery_id})
        return None if doc is None else DeliveryRecord.model_validate(doc)

    async def forget(self, delivery_id: str, token: str) -> None:
        """Delete a leased delivery whose webhook is gone."""
        await self.deliveries.delete_one({"_id": delivery_id, "lease_owner": token})

    async def erased_bodies(self, since: datetime) -> dict[str, str]:
        """The bodies of the deliveries a redaction erased since `since`, by id."""
        cursor = self.deliveries.find({"erased_at": {"$gte": since}}, {"payload": 1})
        return {doc["_id"]: doc["payload"] async for doc in cursor}

    async def insert_delivery(self, record: DeliveryRecord) -> bool:
        """False when this event already has a delivery for this webhook (a redelivery)."""
        return bool(await self.insert_deliveries([record]))

    async def insert_deliveries(self, records: list[DeliveryRecord]) -> list[DeliveryRecord]:
        """Store deliveries with one unordered insert; those whose (webhook, event) already has
        one (a redelivered event) are skipped without failing the others. Returns the new
        ones; re-raises any other failure."""
        if not records:
            return []
        try:
            await self.deliveries.insert_many(
                [record.to_document() for record in records], ordered=False
            )
        except BulkWriteError as exc:
            refused = duplicates_only(exc)
            return [record for index, record in enumerate(records) if index not in refused]
        return list(records)

    async def backfill_pass_ids_once(self) -> int:
        """Give deliveries stored before they had `pass_id` theirs, from their body, once
        (recorded in `webhooks_migrations`): a redaction finds a pass's deliveries by that
        index; it looked for these by a regex over every body, a scan of the whole collection
        inline in the fan-out. Each replica starting at once goes on until none is left, so
        the one that records it done has seen it done. How many it changed."""
        if await self.migrations.find_one({"_id": BACKFILL_MIGRATION}) is not None:
            return 0
        updated = 0
        # One pass over the collection (no index serves "has no pass_id"), writing as it goes;
        # a second finds what a replica of an older release stored meanwhile, if anything.
        while True:
            writes: list[UpdateOne] = []
            found = 0
            async for doc in self.deliveries.find({"pass_id": {"$exists": False}}, {"payload": 1}):
                found += 1
                writes.append(
                    UpdateOne(
                        {"_id": doc["_id"], "pass_id": {"$exists": False}},
                        {"$set": {"pass_id": _pass_id_in(doc.get("payload"))}},
                    )
                )
                if len(writes) == BACKFILL_BATCH:
                    updated += await self._backfilled(writes)
                    writes = []
            updated += await self._backfilled(writes)
            if not found:
                break
        await self.migrations.update_one(
            {"_id": BACKFILL_MIGRATION},
            {"$setOnInsert": {"completed_at": datetime.now(UTC), "updated": updated}},
            upsert=True,
        )
        return updated

    async def _backfilled(self, writes: list[UpdateOne]) -> int:
        if not writes:
            return 0
        return (await self.deliveries.bulk_write(writes, ordered=False)).modified_count

    async def erase_pass_copies(
        self, account_id: str, mode: str, pass_id: str, kept_event_id: str
    ) -> int:
        """Erase a redacted pass's personal data from the bodies of its deliveries (kept in
        the history, and sent again by a retry or a resend), their event metadata, and the
        answers receivers gave; all but the redaction's own deliveries. How many changed."""
        # By the `pass_id` index (deliveries stored before it existed got theirs at a start:
        # backfill_pass_ids_once).
        cursor = self.deliveries.find(
            {
                "pass_id": pass_id,
                "account_id": account_id,
                "mode": mode,
                "event_id": {"$ne": kept_event_id},
            },
            {"payload": 1},
        )
        erased = 0
        async for doc in cursor:
            body = json.loads(doc["payload"])
            data = body.get("data", {})
            if data.get("pass", {}).get("id") != pass_id:
                continue
            erase_pass_data(data, pass_id)
            if isinstance(data.get("event"), dict):
                data["event"]["metadata"] = {}
            await self.deliveries.update_one(
                {"_id": doc["_id"]},
                {
                    "$set": {
                        "payload": compact_json(body),
                        "response_body": None,
                        # What replicas holding it in memory look for (erased_bodies.py).
                        "erased_at": datetime.now(UTC),
                    }
                },
            )
            erased += 1
        return erased

    # -- delivery scheduling (claims with a lease, then the outcome of the attempt) -----------

    async def due(
        self,
        now: datetime,
        limit: int,
        skip_webhooks: list[str],
        skip_accounts: list[str] | None = None,
    ) -> list[DeliveryRecord]:
        """Up to `limit` deliveries due now, the earliest first; nothing is claimed yet.

        Due: pending or failed with the next attempt time reached, or a manual attempt asked
        for (those first); and no live lease (an expired lease is a dead replica's, so it is
        taken over). `skip_webhooks` and `skip_accounts` are those
        the caller already sends for at its per-endpoint and per-account limits: left in, the
        oldest deliveries of one busy account would fill every batch and starve the others.
        """
        skip: dict[str, Any] = _unleased(now)
        if skip_webhooks:
            skip["webhook_id"] = {"$nin": skip_webhooks}
        if skip_accounts:
            skip["account_id"] = {"$nin": skip_accounts}
        # Two queries, each on its own index, rather than one $or that a store may scan for.
        manual = await self._listed({"manual_at": {"$lte": now}, **skip}, "manual_at", limit)
        query = {**_scheduled_due(now), **skip}
        listed = await self._listed(query, "next_attempt_at", limit - len(manual))
        return manual + [delivery for delivery in listed if delivery.manual_at is None]

    async def _listed(self, query: dict[str, Any], order: str, limit: int) -> list[DeliveryRecord]:
        if limit <= 0:
            return []
        cursor = self.deliveries.find(query).sort(order, ASCENDING).limit(limit)
        return [DeliveryRecord.model_validate(doc) async for doc in cursor]

    async def claim(
        self, candidates: list[DeliveryRecord], now: datetime, lease_until: datetime, token: str
    ) -> list[DeliveryRecord]:
        """Lease those of the listed deliveries that are still due, atomically each, under
        `token` (unique to this claim: only it can record the attempts' outcomes), and answer
        them as stored now: one update for all, then one read of what this claim won. Those
        that another replica got first (a live lease) or attempted since, and that are no
        longer due, are left out; one attempted since and due again is claimed with its
        current attempt count, so the count never goes back."""
        if not candidates:
            return []
        lease = {"$set": {"lease_until": lease_until, "lease_owner": token}}
        manual = [d.id for d in candidates if d.manual_at is not None]
        scheduled = [d.id for d in candidates if d.manual_at is None]
        # One update per kind of due, not one $or, which a store may answer with a scan.
        if scheduled:
            query = {"_id": {"$in": scheduled}, **_scheduled_due(now), **_unleased(now)}
            await self.deliveries.update_many(query, lease)
        if manual:
            query = {"_id": {"$in": manual}, "manual_at": {"$lte": now}, **_unleased(now)}
            await self.deliveries.update_many(query, lease)
        return await self.leased([delivery.id for delivery in candidates], token)

    async def leased(self, ids: list[str], token: str) -> list[DeliveryRecord]:
        """Those of the deliveries that `token` holds now."""
        cursor = self.deliveries.find({"_id": {"$in": ids}, "lease_owner": token})
        return [DeliveryRecord.model_validate(doc) async for doc in cursor]

    async def webhooks_by_ids(self, webhook_ids: Collection[str]) -> dict[str, WebhookRecord]:
        cursor = self.webhooks.find({"_id": {"$in": sorted(set(webhook_ids))}})
        return {doc["_id"]: WebhookRecord.model_validate(doc) async for doc in cursor}

    async def record_attempts(
        self,
        outcomes: list[tuple[str, str, dict[str, Any]]],
        manual: dict[str, datetime] | None = None,
    ) -> set[str]:
        """Store attempts' outcomes `(delivery_id, token, changes)` with one bulk write and
        release their leases; answers the ids recorded. One whose lease was lost (taken over
        after it expired, or its webhook and deliveries deleted) is not recorded: every write
        is conditional on the token, which the outcome also stores (`attempt_token`), so the
        rare partial write is told apart with one read."""
        if not outcomes:
            return set()
        tokens_by_id = {delivery_id: token for delivery_id, token, _ in outcomes}
        writes = [
            UpdateOne(
                {"_id": delivery_id, "lease_owner": token},
                {
                    "$set": {
                        **changes,
                        "attempt_token": token,
                        "lease_until": None,
                        "lease_owner": None,
                    }
                },
            )
            for delivery_id, token, changes in outcomes
        ]
        # A manual attempt's request is cleared only if no newer one came meanwhile, and
        # before the lease is given back: cleared after, the delivery was for a moment free
        # and still asked for (a second manual attempt nobody asked for), or claimed as
        # manual and read back as scheduled (a delivered one put back on the schedule).
        clears = [
            UpdateOne(
                {"_id": delivery_id, "manual_at": asked, "lease_owner": tokens_by_id[delivery_id]},
                {"$unset": {"manual_at": ""}},
            )
            for delivery_id, asked in (manual or {}).items()
            if delivery_id in tokens_by_id
        ]
        if clears:
            await self.deliveries.bulk_write(clears, ordered=False)
        result = await self.deliveries.bulk_write(writes, ordered=False)
        ids = {delivery_id for delivery_id, _, _ in outcomes}
        if result.matched_count == len(outcomes):
            return ids
        cursor = self.deliveries.find({"_id": {"$in": sorted(ids)}}, {"attempt_token": 1})
        return {
            doc["_id"]
            async for doc in cursor
            if doc.get("attempt_token") == tokens_by_id[doc["_id"]]
        }

    async def existing_deliveries(self, delivery_ids: list[str]) -> set[str]:
        """Those of the ids whose delivery is still stored."""
        cursor = self.deliveries.find({"_id": {"$in": sorted(delivery_ids)}}, {"_id": 1})
        return {doc["_id"] async for doc in cursor}

    async def postpone(
        self, delivery_id: str, token: str, until: datetime, *, manual: bool
    ) -> None:
        """Give a claim back without an attempt, due again at `until` (the endpoint's rate or
        a Retry-After holds it back): no attempt is counted. A manual attempt stays manual."""
        due_again: dict[str, Any] = {"next_attempt_at": until}
        if manual:
            due_again["manual_at"] = until
        await self.deliveries.update_one(
            {"_id": delivery_id, "lease_owner": token},
            {"$set": {**due_again, "lease_until": None, "lease_owner": None}},
        )

    async def renew(self, held: dict[str, str], lease_until: datetime) -> None:
        """Extend the leases of deliveries (id: the claim's token) this replica still holds."""
        await self.deliveries.update_many(
            {"_id": {"$in": sorted(held)}, "lease_owner": {"$in": sorted(set(held.values()))}},
            {"$set": {"lease_until": lease_until}},
        )

    async def release_many(self, held: dict[str, str]) -> None:
        """Give claims back without an attempt (id: the claim's token): the replica stops."""
        await self.deliveries.update_many(
            {"_id": {"$in": sorted(held)}, "lease_owner": {"$in": sorted(set(held.values()))}},
            {"$set": {"lease_until": None, "lease_owner": None}},
        )


def _scheduled_due(now: datetime) -> dict[str, Any]:
    """Pending or failed, and its time reached."""
    return {"status": {"$in": ["pending", "failed"]}, "next_attempt_at": {"$lte": now}}


def _unleased(now: datetime) -> dict[str, Any]:
    """No live lease: none, or an expired one (a dead replica's, taken over)."""
    return {"lease_until": {"$not": {"$gte": now}}}


def _pass_id_in(payload: object) -> str | None:
    """The pass a delivery's body is about (`data.pass.id`), or None."""
    try:
        body = json.loads(payload) if isinstance(payload, str) else {}
    except ValueError:
        return None
    found = body.get("data", {}).get("pass", {}).get("id") if isinstance(body, dict) else None
    return found if isinstance(found, str) else None
