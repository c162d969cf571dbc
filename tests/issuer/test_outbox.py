"""The outbox relay publishes what was committed, once, even when asked to send it twice."""

import secrets
from datetime import UTC, datetime

from nats.js.api import StreamInfo

from services.issuer.outbox import OutboxRelay
from services.issuer.repository import IssuerRepository
from shared.messages import EVENTS_STREAM
from shared.mongo import create_client
from shared.nats import create_broker, ensure_events_stream


async def _stream(relay_broker_url: str) -> StreamInfo:
    broker = create_broker(relay_broker_url)
    await broker.connect()
    try:
        return await broker.connection.jetstream().stream_info(EVENTS_STREAM)
    finally:
        await broker.stop()


async def test_drain_publishes_and_clears_and_dedupes_a_resend(
    mongo_url: str, nats_url: str
) -> None:
    client = create_client(mongo_url)
    db = client[f"t_{secrets.token_hex(6)}"]
    repo = IssuerRepository(client, db)
    broker = create_broker(nats_url)
    await broker.connect()
    await ensure_events_stream(broker)
    before = (await _stream(nats_url)).state.messages
    relay = OutboxRelay(repo, broker, poll_seconds=60)
    now = datetime.now(UTC)
    try:
        async with repo.unit_of_work() as uow:
            await uow.add_outbox("psEvnt_a", "tessera.events.pass.created", b"{}", now)
            await uow.add_outbox("psEvnt_b", "tessera.events.pass.updated", b"{}", now)
        assert await relay.drain() == 2
        assert await repo.outbox_batch() == []
        # A crash after publishing but before deleting leaves the event to be sent again.
        async with repo.unit_of_work() as uow:
            await uow.add_outbox("psEvnt_a", "tessera.events.pass.created", b"{}", now)
        assert await relay.drain() == 1
        assert (await _stream(nats_url)).state.messages == before + 2
    finally:
        await broker.stop()
        await client.drop_database(db.name)
        await client.close()
