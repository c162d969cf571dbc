"""What other services may read of the webhooks service's data: the only module of it they
import. Answers read models from shared/; a webhook's secret, even encrypted, never leaves."""

from pymongo import DESCENDING

from shared.models import DeliveryRecord
from shared.mongo import Database
from shared.pagination import Page, PageRequest, fetch_page
from shared.views import WebhookView

# Spec 2.7 / 4.1: a webhook's delivery history lists its last 100 attempts.
DELIVERIES_LISTED = 100


class WebhookReads:
    def __init__(self, db: Database):
        self._webhooks = db["webhooks"]
        self._deliveries = db["webhook_deliveries"]

    async def get(self, account_id: str, mode: str, webhook_id: str) -> WebhookView | None:
        doc = await self._webhooks.find_one(
            {"_id": webhook_id, "account_id": account_id, "mode": mode}
        )
        return None if doc is None else WebhookView.model_validate(doc)

    async def page(self, account_id: str, mode: str, page: PageRequest) -> Page[WebhookView]:
        query = {"account_id": account_id, "mode": mode}
        return await fetch_page(self._webhooks, query, page, WebhookView.model_validate)

    async def recent_deliveries(self, webhook_id: str) -> list[DeliveryRecord]:
        cursor = (
            self._deliveries.find({"webhook_id": webhook_id})
            .sort("_id", DESCENDING)
            .limit(DELIVERIES_LISTED)
        )
        return [DeliveryRecord.model_validate(doc) async for doc in cursor]
