"""Deliveries that are over are deleted 90 days (the setting) after their event
(WebhookRepository.purge_finished, swept by shared/sweeper.py); pending and failed ones, and
newer ones, stay."""

from datetime import UTC, datetime, timedelta
from typing import Any

from services.webhooks.repository import WebhookRepository
from shared.ids import derived_id
from shared.models import DeliveryRecord

NOW = datetime(2026, 11, 29, 12, tzinfo=UTC)


async def _delivery(repo: WebhookRepository, status: str, event_at: datetime, **fields: Any) -> str:
    delivery_id = derived_id(
        "webhook_delivery", int(event_at.timestamp() * 1000), f"{status}{event_at}{fields}"
    )
    record = DeliveryRecord.model_validate(
        {
            "_id": delivery_id,
            "account_id": "acct_1",
            "mode": "test",
            "created_at": event_at,
            "webhook_id": "whk_1",
            "event_id": delivery_id,
            "event_type": "pass.created",
            "payload": "{}",
            "status": status,
            "next_attempt_at": event_at if status in ("pending", "failed") else None,
            **fields,
        }
    )
    await repo.deliveries.insert_one(record.model_dump(by_alias=True))
    return delivery_id


async def _left(repo: WebhookRepository) -> set[str]:
    return {doc["_id"] async for doc in repo.deliveries.find({}, {"_id": 1})}


async def test_finished_deliveries_older_than_the_retention_are_deleted(
    repo: WebhookRepository,
) -> None:
    old = NOW - timedelta(days=91)
    gone = {await _delivery(repo, status, old) for status in ("delivered", "dead")}
    kept = {await _delivery(repo, status, old) for status in ("pending", "failed")}
    # Asked for again by a resend or a recover, or in an attempt: not yet.
    kept.add(await _delivery(repo, "dead", old, manual_at=NOW))
    kept.add(await _delivery(repo, "delivered", old, lease_owner="r1/1", lease_until=NOW))
    kept |= {
        await _delivery(repo, status, NOW - timedelta(days=89)) for status in ("delivered", "dead")
    }
    assert await repo.purge_finished(NOW - timedelta(days=90)) == 2
    assert await _left(repo) == kept
    assert not gone & await _left(repo)
