"""The delivery listing the api reads (WebhookReads.deliveries_page) against a real store:
newest first, filtered by status and event type, paged with Stripe-style cursors."""

import pytest

from services.webhooks.operations import DeliveryOperations
from services.webhooks.reads import WebhookReads
from services.webhooks.repository import WebhookRepository
from shared.clock import SystemClock
from shared.models import DeliveryRecord
from shared.pagination import PageRequest
from tests.webhooks.records import delivery


@pytest.fixture
async def stored(repo: WebhookRepository) -> list[DeliveryRecord]:
    """Six deliveries of whk_a, oldest first, and one of another webhook."""
    await DeliveryOperations(repo.deliveries.database, SystemClock(), lambda: None).ensure_indexes()
    kinds = [
        ("dead", "pass.issued"),
        ("delivered", "pass.issued"),
        ("dead", "pass.voided"),
        ("failed", "pass.issued"),
        ("dead", "pass.issued"),
        ("pending", "pass.voided"),
    ]
    records = [delivery(status=status, event_type=kind) for status, kind in kinds]
    records.append(delivery(webhook_id="whk_b", status="dead"))
    for record in records:
        await repo.deliveries.insert_one(record.to_document())
    return records[:6]


def _ids(records: list[DeliveryRecord]) -> list[str]:
    return [record.id for record in records]


async def test_the_default_page_is_every_delivery_of_the_webhook_newest_first(
    repo: WebhookRepository, stored: list[DeliveryRecord]
) -> None:
    reads = WebhookReads(repo.deliveries.database)
    page = await reads.deliveries_page("whk_a", PageRequest(limit=100))
    assert (_ids(page.items), page.has_more) == (_ids(stored[::-1]), False)


async def test_filters_by_status_and_event_type_alone_and_together(
    repo: WebhookRepository, stored: list[DeliveryRecord]
) -> None:
    reads = WebhookReads(repo.deliveries.database)
    every = PageRequest(limit=100)
    dead = await reads.deliveries_page("whk_a", every, status="dead")
    assert _ids(dead.items) == _ids([stored[4], stored[2], stored[0]])
    voided = await reads.deliveries_page("whk_a", every, event_type="pass.voided")
    assert _ids(voided.items) == _ids([stored[5], stored[2]])
    both = await reads.deliveries_page("whk_a", every, status="dead", event_type="pass.issued")
    assert _ids(both.items) == _ids([stored[4], stored[0]])


async def test_cursors_page_through_a_filtered_listing(
    repo: WebhookRepository, stored: list[DeliveryRecord]
) -> None:
    reads = WebhookReads(repo.deliveries.database)
    first = await reads.deliveries_page("whk_a", PageRequest(limit=2), status="dead")
    assert (_ids(first.items), first.has_more) == (_ids([stored[4], stored[2]]), True)
    after = PageRequest(limit=2, starting_after=first.items[-1].id)
    second = await reads.deliveries_page("whk_a", after, status="dead")
    assert (_ids(second.items), second.has_more) == (_ids([stored[0]]), False)
    before = PageRequest(limit=2, ending_before=stored[0].id)
    back = await reads.deliveries_page("whk_a", before, status="dead")
    assert (_ids(back.items), back.has_more) == (_ids([stored[4], stored[2]]), False)
