"""The pass event -> webhook event type mapping of issue 5 section 2 (docs/webhooks.md)."""

from typing import get_args

import pytest

from services.webhooks.mapping import WEBHOOK_EVENT_TYPES, webhook_type
from shared.messages import WebhookEventType


@pytest.mark.parametrize(
    ("event_type", "metadata", "expected"),
    [
        ("created", {}, "pass.issued"),
        ("downloaded", {"wallet": "apple"}, "pass.add_intent"),
        ("downloaded", {"wallet": "google"}, "pass.add_intent"),
        ("installed", {}, "pass.added_to_wallet"),
        ("updated", {"stage": "pushed", "field_values": ["seat"]}, "pass.update_pushed"),
        ("updated", {}, "pass.update_pushed"),
        ("updated", {"stage": "delivered", "wallet": "apple"}, "pass.update_delivered"),
        ("removed", {}, "pass.removed"),
        ("voided", {}, "pass.voided"),
        ("redeemed", {"scan_id": "scan_x"}, "pass.redeemed"),
    ],
)
def test_each_pass_event_fires_its_webhook_type(
    event_type: str, metadata: dict[str, str], expected: str
) -> None:
    assert webhook_type(event_type, metadata) == expected


@pytest.mark.parametrize(
    ("event_type", "metadata"),
    [
        ("url_viewed", {}),
        ("downloaded", {}),  # a download that is no step toward a wallet
        ("downloaded", {"wallet": "other"}),
        ("unknown", {}),
    ],
)
def test_events_without_a_webhook_type_fire_nothing(
    event_type: str, metadata: dict[str, str]
) -> None:
    assert webhook_type(event_type, metadata) is None


def test_the_types_match_what_subscriptions_accept() -> None:
    accepted = set(get_args(WebhookEventType)) - {"*"}
    assert set(WEBHOOK_EVENT_TYPES) == accepted
