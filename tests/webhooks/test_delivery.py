"""Deliverer (services/webhooks/delivery.py) against a real MongoDB-wire store."""

from datetime import UTC, datetime, timedelta
from typing import Any, cast

from services.webhooks.delivery import Deliverer
from services.webhooks.repository import WebhookRepository
from tests.webhooks.records import delivery


async def test_a_delivery_whose_webhook_is_gone_is_deleted_not_claimed_again(
    repo: WebhookRepository,
) -> None:
    """A fan-out read the webhook, then its DELETE removed the deliveries there were, then the
    fan-out stored its own: the first claim of such a delivery deletes it (it was claimed
    again at the end of every lease, forever)."""
    now = datetime.now(UTC)
    orphan = delivery(
        webhook_id="whk_deleted", lease_owner="r1/1", lease_until=now + timedelta(seconds=60)
    )
    await repo.insert_delivery(orphan)
    unused = cast(Any, None)  # nothing but the store is used for a deleted webhook
    deliverer = Deliverer(repo, unused, unused, unused, [0.0], unused, unused)

    assert await deliverer.attempt(orphan, None, "r1/1", lambda: None) is None

    assert await repo.deliveries.count_documents({"_id": orphan.id}) == 0
