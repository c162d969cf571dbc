"""The webhooks service's durable consumer of the events stream: fan-out, then acknowledge.

The consumer takes the events a batch at a time (shared/event_batches.py). Each event becomes
one pending delivery per subscribed webhook (services/webhooks/delivery.py), the whole batch's
stored with one insert by the scheduler, which leases those that fit its limits as it stores
them, so their first attempts go out at once.
The events are acknowledged as soon as the deliveries are stored: attempts and retries are the
scheduler's, from MongoDB, never delayed NACKs here. A failed write (MongoDB down) NACKs the
batch so it is redelivered; the unique (webhook, event) index makes the redelivery create only
what is missing.
"""

from faststream.nats import NatsBroker

from services.webhooks.delivery import plan_deliveries
from services.webhooks.repository import WebhookRepository
from services.webhooks.scheduler import Scheduler
from shared.clock import Clock
from shared.event_batches import EventBatchConsumer
from shared.logs import account_id_var
from shared.messages import WEBHOOKS_CONSUMER, PassEventMessage


def register(
    broker: NatsBroker,
    repo: WebhookRepository,
    clock: Clock,
    delays: list[float],
    scheduler: Scheduler,
) -> EventBatchConsumer:
    """The consumer that fans events out; a worker for the app's `running`."""

    async def fan_out(events: list[PassEventMessage]) -> None:
        accounts = {event.account_id for event in events}
        account_id_var.set(accounts.pop() if len(accounts) == 1 else None)
        planned, webhooks = await plan_deliveries(repo, clock, delays, events)
        if planned:
            await scheduler.store_new(planned, webhooks)

    return EventBatchConsumer(broker, WEBHOOKS_CONSUMER, fan_out)
