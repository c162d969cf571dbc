"""NATS subscribers of the issuer: thin wrappers that parse a command and reply."""

import logging

from faststream.nats import NatsBroker, NatsMessage
from pydantic import BaseModel

from services.issuer.service import IssuerService
from shared.logs import account_id_var, request_id_var
from shared.messages import ISSUER_COMMANDS, ISSUER_QUEUE, issuer_command_adapter
from shared.nats import max_payload, reply_to_command

log = logging.getLogger(__name__)


def register(broker: NatsBroker, service: IssuerService, max_workers: int) -> None:
    async def handle(body: bytes) -> BaseModel:
        command = issuer_command_adapter.validate_json(body)
        request_id_var.set(command.request_id)
        account_id_var.set(command.account_id)
        result = await service.handle(command)
        log.info("%s %s handled", command.type, command.command_id)
        return result

    @broker.subscriber(f"{ISSUER_COMMANDS}.*", queue=ISSUER_QUEUE, max_workers=max_workers)
    async def on_command(msg: NatsMessage) -> bytes:
        return await reply_to_command(msg.body, handle, max_payload(broker))
