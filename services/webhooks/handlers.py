"""The webhooks service's durable consumer of the events stream: fan-out, then acknowledge.

Each event becomes one pending delivery per subscribed webhook (services/webhooks/delivery.py),
offered to the scheduler so the first attempt goes out at once. The message is acknowledged
as soon as the deliveries are stored: attempts and retries are the scheduler's, from MongoDB,
never delayed NACKs here. A failed write (MongoDB down) NACKs the event so it is redelivered;
the unique (webhook, event) index makes the redelivery create only what is missing.
"""

from collections.abc import Callable

from faststream.nats import NatsBroker

from services.webhooks.delivery import fan_out
from services.webhooks.repository import WebhookRepository
from shared.clock import Clock
from shared.logs import account_id_var
from shared.messages import WEBHOOKS_CONSUMER, PassEventMessage
from shared.models import DeliveryRecord
from shared.nats import subscribe_to_events


def register(
    broker: NatsBroker,
    repo: WebhookRepository,
    clock: Clock,
    delays: list[float],
    offer: Callable[[list[DeliveryRecord]], None],
) -> None:
    async def fan_out_and_offer(event: PassEventMessage) -> None:
        account_id_var.set(event.account_id)
        if created := await fan_out(repo, clock, delays, event):
            offer(created)

    subscribe_to_events(broker, WEBHOOKS_CONSUMER, fan_out_and_offer)
