"""NATS subscriber for webhook subscription commands (request/reply, always answers)."""

from faststream.nats import NatsBroker, NatsMessage
from pydantic import BaseModel

from services.webhooks.service import WebhookService
from shared.logs import account_id_var, request_id_var
from shared.messages import WEBHOOKS_COMMANDS, WEBHOOKS_QUEUE, webhooks_command_adapter
from shared.nats import reply_to_command


def register(broker: NatsBroker, service: WebhookService) -> None:
    async def handle(body: bytes) -> BaseModel:
        command = webhooks_command_adapter.validate_json(body)
        request_id_var.set(command.request_id)
        account_id_var.set(command.account_id)
        return await service.handle(command)

    @broker.subscriber(f"{WEBHOOKS_COMMANDS}.*", queue=WEBHOOKS_QUEUE)
    async def on_command(msg: NatsMessage) -> bytes:
        return await reply_to_command(msg.body, handle)
