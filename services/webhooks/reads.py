"""What other services may read of the webhooks service's data: the only module of it they
import. Answers read models from shared/; a webhook's secret, even encrypted, never leaves."""

from shared.models import DeliveryRecord
from shared.mongo import Database
from shared.pagination import Page, PageRequest, fetch_page
from shared.views import WebhookView

# Spec 2.7 / 4.1: a webhook's delivery history lists its last 100 attempts (the default and
# the largest page).
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

    async def delivery_ids_of_pass(self, account_id: str, mode: str, pass_id: str) -> list[str]:
        """The ids of a pass's deliveries (a redaction erases the api's stored answers of
        their resends)."""
        cursor = self._deliveries.find(
            {"pass_id": pass_id, "account_id": account_id, "mode": mode}, {"_id": 1}
        )
        return [doc["_id"] async for doc in cursor]

    async def deliveries_page(
        self,
        webhook_id: str,
        page: PageRequest,
        status: str | None = None,
        event_type: str | None = None,
    ) -> Page[DeliveryRecord]:
        """A page of the webhook's deliveries, newest first, optionally of one status and one
        event type (the status filter pages on an index of DeliveryOperations)."""
        query: dict[str, str] = {"webhook_id": webhook_id}
        if status is not None:
            query["status"] = status
        if event_type is not None:
            query["event_type"] = event_type
        return await fetch_page(self._deliveries, query, page, DeliveryRecord.model_validate)
