"""The events consumer drops a malformed message once instead of redelivering it forever."""

import asyncio

import pytest
from nats.js.api import ConsumerInfo

from shared.messages import EVENTS_CONSUMER, EVENTS_STREAM
from shared.nats import create_broker
from tests.support.polling import poll
from tests.support.stack import Stack

pytestmark = pytest.mark.e2e


async def _publish_garbage(nats_url: str) -> None:
    broker = create_broker(nats_url)
    await broker.connect()
    try:
        js = broker.connection.jetstream()
        await js.publish("tessera.events.pass.created", b"not an event")
    finally:
        await broker.stop()


async def _consumer(nats_url: str) -> ConsumerInfo:
    broker = create_broker(nats_url)
    await broker.connect()
    try:
        info: ConsumerInfo = await broker.connection.jetstream().consumer_info(
            EVENTS_STREAM, EVENTS_CONSUMER
        )
        return info
    finally:
        await broker.stop()


def test_a_malformed_event_is_dropped_not_redelivered(stack: Stack) -> None:
    asyncio.run(_publish_garbage(stack.nats_url))
    info = poll(
        lambda: asyncio.run(_consumer(stack.nats_url)),
        lambda found: found.num_pending == 0 and found.num_ack_pending == 0,
    )
    assert info.num_redelivered == 0
    assert "dropping malformed event" in stack.log_text("events")
