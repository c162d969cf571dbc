"""NATS subscribers of the issuer: thin wrappers that parse a command and reply."""

from typing import Any

from faststream.nats import NatsBroker, NatsMessage

from services.issuer.service import IssuerService
from shared.messages import ISSUER_COMMANDS, ISSUER_QUEUE, issuer_command_adapter
from shared.nats import reply_to_command


def register(broker: NatsBroker, service: IssuerService) -> None:
    async def handle(body: bytes) -> dict[str, Any]:
        return await service.handle(issuer_command_adapter.validate_json(body))

    @broker.subscriber(f"{ISSUER_COMMANDS}.*", queue=ISSUER_QUEUE)
    async def on_command(msg: NatsMessage) -> bytes:
        return await reply_to_command(msg.body, handle)
