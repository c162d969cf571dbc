"""Helpers for the end-to-end webhook tests: subscriptions, delivery listings, verification,
and publishing a pass event straight to the stream (as the api does for its own events)."""

import asyncio
import json
from typing import Any

import httpx2
import stripe
from standardwebhooks.webhooks import Webhook

from shared.messages import EVENTS_STREAM, PassEventMessage
from shared.nats import create_broker
from tests.support.api import ok
from tests.support.polling import poll
from tests.support.receiver import Received


def create_webhook(
    client: httpx2.Client, url: str, events: list[str] | None = None, **fields: Any
) -> dict[str, Any]:
    return ok(client.post("/v1/webhooks", json={"url": url, "events": events or ["*"], **fields}))


def deliveries(client: httpx2.Client, webhook_id: str) -> list[dict[str, Any]]:
    page = ok(client.get(f"/v1/webhooks/{webhook_id}/deliveries"))
    data: list[dict[str, Any]] = page["data"]
    return data


def settled(
    client: httpx2.Client, webhook_id: str, count: int, timeout: float = 30.0
) -> list[dict[str, Any]]:
    """Wait until the webhook has `count` deliveries, each delivered or dead; newest first."""
    return poll(
        lambda: deliveries(client, webhook_id),
        lambda found: (
            len(found) == count and all(d["status"] in ("delivered", "dead") for d in found)
        ),
        timeout,
    )


def body_of(request: Received) -> dict[str, Any]:
    parsed: dict[str, Any] = json.loads(request.body)
    return parsed


def verify(request: Received, secret: str) -> None:
    """Both independent verifiers accept the request (each raises otherwise)."""
    stripe.WebhookSignature.verify_header(
        request.body.decode(), request.headers["svc-signature"], secret, 300
    )
    Webhook(secret).verify(request.body.decode(), request.headers)


async def _publish(nats_url: str, event: PassEventMessage) -> None:
    broker = create_broker(nats_url)
    await broker.connect()
    try:
        await broker.publish(
            event.model_dump_json().encode(),
            event.subject,
            stream=EVENTS_STREAM,
            headers={"Nats-Msg-Id": event.id},
            timeout=5.0,
        )
    finally:
        await broker.stop()


def publish_event(nats_url: str, event: PassEventMessage) -> None:
    asyncio.run(_publish(nats_url, event))
