"""The events service's NATS subscribers: the durable JetStream consumer (record each event,
then acknowledge) and the wallet commands (`drop_push_token` from the issuer's pushes)."""

from typing import Any

from faststream.nats import NatsBroker, NatsMessage

from services.events.registrations import AppleWebService
from services.events.repository import EventsRepository
from services.events.service import record_event
from shared.messages import (
    EVENTS_CONSUMER,
    WALLET_COMMANDS,
    WALLET_QUEUE,
    PassEventMessage,
    wallet_command_adapter,
)
from shared.nats import reply_to_command, subscribe_to_events


def register(broker: NatsBroker, repo: EventsRepository) -> None:
    async def record(event: PassEventMessage) -> None:
        await record_event(repo, event)

    subscribe_to_events(broker, EVENTS_CONSUMER, record)


def register_wallet_commands(broker: NatsBroker, wallet: AppleWebService) -> None:
    async def handle(body: bytes) -> dict[str, Any]:
        command = wallet_command_adapter.validate_json(body)
        return await wallet.drop_push_token(command)

    @broker.subscriber(f"{WALLET_COMMANDS}.*", queue=WALLET_QUEUE)
    async def on_command(msg: NatsMessage) -> bytes:
        return await reply_to_command(msg.body, handle)
