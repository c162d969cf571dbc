"""The webhooks service's durable consumer of the events stream: fan-out, then acknowledge.

Each event becomes one pending delivery per subscribed webhook (services/webhooks/delivery.py),
offered to the scheduler so the first attempt goes out at once. The message is acknowledged
as soon as the deliveries are stored: attempts and retries are the scheduler's, from MongoDB,
never delayed NACKs here. A failed write (MongoDB down) NACKs the event so it is redelivered;
the unique (webhook, event) index makes the redelivery create only what is missing.
"""

import logging
from collections.abc import Callable

from faststream import AckPolicy
from faststream.nats import NatsBroker, NatsMessage, PullSub
from pydantic import ValidationError

from services.webhooks.delivery import fan_out
from services.webhooks.repository import WebhookRepository
from shared.clock import Clock
from shared.logs import account_id_var
from shared.messages import EVENTS_SUBJECT_PREFIX, WEBHOOKS_CONSUMER, pass_event_adapter
from shared.models import DeliveryRecord
from shared.nats import events_stream

log = logging.getLogger(__name__)


def register(
    broker: NatsBroker,
    repo: WebhookRepository,
    clock: Clock,
    delays: list[float],
    offer: Callable[[list[DeliveryRecord]], None],
) -> None:
    @broker.subscriber(
        f"{EVENTS_SUBJECT_PREFIX}.>",
        stream=events_stream(),
        durable=WEBHOOKS_CONSUMER,
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
        account_id_var.set(event.account_id)
        if created := await fan_out(repo, clock, delays, event):
            offer(created)
