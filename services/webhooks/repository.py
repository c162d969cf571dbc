"""Every MongoDB call of the webhooks service: subscriptions and their deliveries."""

import secrets
from collections.abc import Collection
from datetime import datetime, timedelta
from typing import Any, Literal

from pymongo import ASCENDING, DESCENDING
from pymongo.errors import BulkWriteError, DuplicateKeyError

from shared.models import DeliveryRecord, WebhookRecord
from shared.mongo import Database, duplicates_only

PROCESSED_COMMAND_TTL = timedelta(hours=48)
# What inserting a webhook came to: stored; beaten by a replay of the same create command; or
# beaten to its slot by another create of the same account and mode.
Inserted = Literal["inserted", "duplicate_command", "slot_taken"]


class WebhookRepository:
    def __init__(self, db: Database):
        self.webhooks = db["webhooks"]
        self.deliveries = db["webhook_deliveries"]
        self.processed = db["webhook_commands"]

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

    async def replace(self, record: WebhookRecord) -> None:
        """Store the record's fields; the webhook keeps its slot and create command id."""
        fields = {key: value for key, value in record.to_document().items() if key != "_id"}
        await self.webhooks.update_one({"_id": record.id}, {"$set": fields})

    async def delete(self, webhook_id: str) -> None:
        """Hard delete: the webhook, then its history (which also ends its pending retries)."""
        await self.webhooks.delete_one({"_id": webhook_id})
        await self.deliveries.delete_many({"webhook_id": webhook_id})

    async def subscribed(self, account_id: str, mode: str, event_type: str) -> list[WebhookRecord]:
        """Enabled webhooks of the account and mode that want `event_type` (or "*")."""
        cursor = self.webhooks.find(
            {
                "account_id": account_id,
                "mode": mode,
                "enabled": True,
                "events": {"$in": [event_type, "*"]},
            }
        )
        return [WebhookRecord.model_validate(doc) async for doc in cursor]

    async def subscribed_to_any(
        self, account_id: str, mode: str, event_types: Collection[str]
    ) -> list[WebhookRecord]:
        """Enabled webhooks of the account and mode that want any of `event_types` (or "*")."""
        cursor = self.webhooks.find(
            {
                "account_id": account_id,
                "mode": mode,
                "enabled": True,
                "events": {"$in": [*sorted(event_types), "*"]},
            }
        )
        return [WebhookRecord.model_validate(doc) async for doc in cursor]

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

    # -- delivery scheduling (claims with a lease, then the outcome of the attempt) -----------

    async def due(
        self,
        now: datetime,
        limit: int,
        skip_webhooks: list[str],
        skip_accounts: list[str] | None = None,
    ) -> list[DeliveryRecord]:
        """Up to `limit` deliveries due now, the earliest first; nothing is claimed yet.

        Due: pending or failed, next attempt time reached, no live lease (an expired lease is
        a dead replica's, so it is taken over). `skip_webhooks` and `skip_accounts` are those
        the caller already sends for at its per-endpoint and per-account limits: left in, the
        oldest deliveries of one busy account would fill every batch and starve the others.
        """
        query: dict[str, Any] = {**_due(now)}
        if skip_webhooks:
            query["webhook_id"] = {"$nin": skip_webhooks}
        if skip_accounts:
            query["account_id"] = {"$nin": skip_accounts}
        cursor = self.deliveries.find(query).sort("next_attempt_at", ASCENDING).limit(limit)
        return [DeliveryRecord.model_validate(doc) async for doc in cursor]

    async def claim(
        self, delivery: DeliveryRecord, now: datetime, lease_until: datetime, token: str
    ) -> bool:
        """Lease a listed delivery if it is still due and unchanged, atomically. False when
        another replica got there first (it holds a live lease, or recorded an attempt since
        the listing, which changed `attempts`). `token` is unique per claim: only this claim
        can record the attempt's outcome."""
        leased = await self.deliveries.update_one(
            {"_id": delivery.id, "attempts": delivery.attempts, **_due(now)},
            {"$set": {"lease_until": lease_until, "lease_owner": token}},
        )
        return leased.modified_count == 1

    async def record_attempt(self, delivery_id: str, token: str, changes: dict[str, Any]) -> bool:
        """Store an attempt's outcome and release the lease; False when the lease was lost
        (taken over after it expired, or the webhook and its deliveries were deleted)."""
        result = await self.deliveries.update_one(
            {"_id": delivery_id, "lease_owner": token},
            {"$set": {**changes, "lease_until": None, "lease_owner": None}},
        )
        return result.matched_count == 1

    async def release(self, delivery_id: str, token: str) -> None:
        """Give a claim back without an attempt (the replica is stopping)."""
        await self.deliveries.update_one(
            {"_id": delivery_id, "lease_owner": token},
            {"$set": {"lease_until": None, "lease_owner": None}},
        )


def _due(now: datetime) -> dict[str, Any]:
    """Pending or failed, its time reached, and no live lease (none, or an expired one)."""
    return {
        "status": {"$in": ["pending", "failed"]},
        "next_attempt_at": {"$lte": now},
        "lease_until": {"$not": {"$gte": now}},
    }
