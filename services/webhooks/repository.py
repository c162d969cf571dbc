"""Every MongoDB call of the webhooks service: subscriptions and their deliveries."""

from datetime import datetime, timedelta
from typing import Any

from pymongo import ASCENDING, DESCENDING
from pymongo.errors import DuplicateKeyError

from shared.models import DeliveryRecord, WebhookRecord
from shared.mongo import Database
from shared.pagination import Page, PageRequest, fetch_page

PROCESSED_COMMAND_TTL = timedelta(hours=48)
DELIVERIES_LISTED = 100


class WebhookRepository:
    def __init__(self, db: Database):
        self.webhooks = db["webhooks"]
        self.deliveries = db["webhook_deliveries"]
        self.processed = db["webhook_commands"]

    async def ensure_indexes(self) -> None:
        scope = [("account_id", ASCENDING), ("mode", ASCENDING)]
        await self.webhooks.create_index([*scope, ("_id", DESCENDING)])
        await self.webhooks.create_index([*scope, ("enabled", ASCENDING)])
        # One delivery per (webhook, event): a redelivered event creates nothing new.
        await self.deliveries.create_index(
            [("webhook_id", ASCENDING), ("event_id", ASCENDING)], unique=True
        )
        await self.deliveries.create_index([("webhook_id", ASCENDING), ("_id", DESCENDING)])
        await self.deliveries.create_index([("status", ASCENDING), ("next_attempt_at", ASCENDING)])
        await self.processed.create_index("expires_at", expireAfterSeconds=0)

    # -- subscriptions -------------------------------------------------------------------------

    async def insert(self, record: WebhookRecord) -> None:
        await self.webhooks.insert_one(record.to_document())

    async def get(self, account_id: str, mode: str, webhook_id: str) -> WebhookRecord | None:
        doc = await self.webhooks.find_one(
            {"_id": webhook_id, "account_id": account_id, "mode": mode}
        )
        return None if doc is None else WebhookRecord.model_validate(doc)

    async def by_id(self, webhook_id: str) -> WebhookRecord | None:
        doc = await self.webhooks.find_one({"_id": webhook_id})
        return None if doc is None else WebhookRecord.model_validate(doc)

    async def replace(self, record: WebhookRecord) -> None:
        await self.webhooks.replace_one({"_id": record.id}, record.to_document())

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
        try:
            await self.deliveries.insert_one(record.to_document())
        except DuplicateKeyError:
            return False
        return True


class WebhookReads:
    """Read-only queries the api runs against the webhooks service's collections."""

    def __init__(self, db: Database):
        self._webhooks = db["webhooks"]
        self._deliveries = db["webhook_deliveries"]

    async def get(self, account_id: str, mode: str, webhook_id: str) -> WebhookRecord | None:
        doc = await self._webhooks.find_one(
            {"_id": webhook_id, "account_id": account_id, "mode": mode}
        )
        return None if doc is None else WebhookRecord.model_validate(doc)

    async def page(self, account_id: str, mode: str, page: PageRequest) -> Page:
        return await fetch_page(self._webhooks, {"account_id": account_id, "mode": mode}, page)

    async def recent_deliveries(self, webhook_id: str) -> list[DeliveryRecord]:
        cursor = (
            self._deliveries.find({"webhook_id": webhook_id})
            .sort("_id", DESCENDING)
            .limit(DELIVERIES_LISTED)
        )
        return [DeliveryRecord.model_validate(doc) async for doc in cursor]
