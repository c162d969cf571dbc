"""The events service's NATS subscribers: the durable JetStream consumer (record each event,
then acknowledge) and the wallet commands (`drop_push_token` from the issuer's pushes)."""

import logging
from typing import Any

from faststream import AckPolicy
from faststream.nats import NatsBroker, NatsMessage, PullSub
from pydantic import ValidationError

from services.events.registrations import AppleWebService
from services.events.repository import EventsRepository
from services.events.service import record_event
from shared.messages import (
    EVENTS_CONSUMER,
    EVENTS_SUBJECT_PREFIX,
    WALLET_COMMANDS,
    WALLET_QUEUE,
    pass_event_adapter,
    wallet_command_adapter,
)
from shared.nats import events_stream, reply_to_command

log = logging.getLogger(__name__)


def register(broker: NatsBroker, repo: EventsRepository) -> None:
    # NACK_ON_ERROR: a failed write (MongoDB down) is redelivered, never lost.
    @broker.subscriber(
        f"{EVENTS_SUBJECT_PREFIX}.>",
        stream=events_stream(),
        durable=EVENTS_CONSUMER,
        pull_sub=PullSub(batch_size=50, timeout=1.0),
        ack_policy=AckPolicy.NACK_ON_ERROR,
    )
    async def on_event(msg: NatsMessage) -> None:
        try:
            event = pass_event_adapter.validate_json(msg.body)
        except ValidationError:
            # A message that can never parse would be redelivered forever: drop it, loudly.
            log.error("dropping malformed event %s on %s", msg.message_id, msg.raw_message.subject)
            await msg.reject()
            return
        await record_event(repo, event)


def register_wallet_commands(broker: NatsBroker, wallet: AppleWebService) -> None:
    async def handle(body: bytes) -> dict[str, Any]:
        command = wallet_command_adapter.validate_json(body)
        return await wallet.drop_push_token(command)

    @broker.subscriber(f"{WALLET_COMMANDS}.*", queue=WALLET_QUEUE)
    async def on_command(msg: NatsMessage) -> bytes:
        return await reply_to_command(msg.body, handle)
