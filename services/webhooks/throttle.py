"""A webhook's `max_deliveries_per_second`, across every replica: sends at least 1/rate apart.

The webhook document holds `next_send_at`, the earliest time the next request may go out. A
send takes its slot with one conditional update (the slot must have come: `next_send_at` unset
or reached), which moves it on by 1/rate; a send that finds it taken waits for it, not counted
as an attempt (services/webhooks/delivery.py postpones the delivery to that time). Requests are
thus spaced evenly, so any one-second window of a receiver's clock sees at most the rate, plus
one at the window's edge; there is no burst allowance.
"""

from datetime import datetime, timedelta

from services.webhooks.repository import WebhookRepository
from shared.models import WebhookRecord


class Throttle:
    def __init__(self, repo: WebhookRepository):
        self._webhooks = repo.webhooks

    async def take(self, webhook: WebhookRecord, now: datetime) -> datetime | None:
        """None when a send may go now (its slot is taken); otherwise when the next slot
        comes. Always None for a webhook without a rate."""
        rate = webhook.max_deliveries_per_second
        if rate is None:
            return None
        interval = timedelta(seconds=1 / rate)
        taken = await self._webhooks.find_one_and_update(
            {
                "_id": webhook.id,
                "$or": [{"next_send_at": None}, {"next_send_at": {"$lte": now}}],
            },
            {"$set": {"next_send_at": now + interval}},
            projection={"_id": 1},
        )
        if taken is not None:
            return None
        current = await self._webhooks.find_one({"_id": webhook.id}, {"next_send_at": 1})
        next_send = None if current is None else current.get("next_send_at")
        return next_send if isinstance(next_send, datetime) and next_send > now else now + interval
