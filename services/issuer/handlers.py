"""NATS subscribers of the issuer: thin wrappers that parse a command or a query and reply."""

import logging

from faststream.nats import NatsBroker, NatsMessage
from pydantic import BaseModel

from services.issuer.google_links import GoogleLinks
from services.issuer.service import IssuerService
from shared.logs import account_id_var, request_id_var
from shared.messages import (
    ISSUER_COMMANDS,
    ISSUER_QUERIES,
    ISSUER_QUEUE,
    SignGoogleSaveLink,
    issuer_command_adapter,
)
from shared.nats import max_payload, reply_to_command

log = logging.getLogger(__name__)


def register(
    broker: NatsBroker, service: IssuerService, links: GoogleLinks, max_workers: int
) -> None:
    async def handle(body: bytes) -> BaseModel:
        command = issuer_command_adapter.validate_json(body)
        request_id_var.set(command.request_id)
        account_id_var.set(command.account_id)
        result = await service.handle(command)
        log.info("%s %s handled", command.type, command.command_id)
        return result

    async def answer(body: bytes) -> BaseModel:
        query = SignGoogleSaveLink.model_validate_json(body)
        request_id_var.set(query.request_id)
        account_id_var.set(query.account_id)
        return await links.sign(query)

    @broker.subscriber(f"{ISSUER_COMMANDS}.*", queue=ISSUER_QUEUE, max_workers=max_workers)
    async def on_command(msg: NatsMessage) -> bytes:
        return await reply_to_command(msg.body, handle, max_payload(broker))

    @broker.subscriber(f"{ISSUER_QUERIES}.*", queue=ISSUER_QUEUE, max_workers=max_workers)
    async def on_query(msg: NatsMessage) -> bytes:
        return await reply_to_command(msg.body, answer, max_payload(broker))
