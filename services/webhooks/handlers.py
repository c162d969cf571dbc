"""The webhooks service's durable consumer of the events stream: fan-out, then acknowledge.

The consumer takes the events a batch (of up to 25) at a time (shared/event_batches.py), up to
sixteen batches in hand at once per replica (two fetch loops, each fetching on while its batches
are handled).
Each event becomes one pending delivery per subscribed webhook (services/webhooks/delivery.py);
the scheduler sends the first attempts it may send at once, then stores the batch's deliveries
with one insert per chunk, with the outcomes of the attempts that ended and leases on the rest
it can attempt at once (services/webhooks/scheduler.py `store_new`). The events are acknowledged
as soon as the deliveries are stored: later attempts and retries are the scheduler's, from
MongoDB, never delayed NACKs here. A failed write (MongoDB down) NACKs the batch so it is
redelivered; the unique (webhook, event) index makes the redelivery create only what is missing,
and a redelivered event's first attempts are made only after its deliveries are stored.
"""

from functools import partial

from faststream.nats import NatsBroker

from services.webhooks.delivery import plan_deliveries
from services.webhooks.quiet_scopes import QuietScopes
from services.webhooks.repository import WebhookRepository
from services.webhooks.scheduler import Scheduler
from shared.clock import Clock
from shared.event_batches import EventBatchConsumer, ReceivedBatch
from shared.logs import account_id_var
from shared.messages import WEBHOOKS_CONSUMER, PassEventMessage
from shared.redaction import ErasureAgain, is_redaction

# Fetch loops per replica, and batches each has in hand at once: a loop fetches the next batch
# as soon as it took one, while the batches it took wait on their first attempts' answers and
# their inserts, so new events never wait in the stream behind those writes. Under a steady
# trickle batches are small (a few events), so many are in hand at once; eight per loop
# were too few at 200 events/s (the next events waited in the stream, up to 200 ms).
FETCHERS = 2
IN_FLIGHT = 64
# Events per batch, and events a loop holds at most: a replica has at most 400 events in hand
# (as four loops of 100 had before), so a burst is shared with the other replicas rather than
# taken whole by the first to fetch.
BATCH_EVENTS = 25
IN_HAND_PER_FETCHER = 200


def register(
    broker: NatsBroker,
    repo: WebhookRepository,
    clock: Clock,
    delays: list[float],
    scheduler: Scheduler,
    quiet: QuietScopes | None = None,
) -> list[EventBatchConsumer]:
    """The consumers that fan events out (FETCHERS of them on the one durable); workers for
    the app's `running`."""
    erase_again = ErasureAgain()

    async def fan_out(events: list[PassEventMessage]) -> None:
        accounts = {event.account_id for event in events}
        account_id_var.set(accounts.pop() if len(accounts) == 1 else None)
        planned, webhooks = await plan_deliveries(repo, clock, delays, events, quiet)
        again = events.redelivered if isinstance(events, ReceivedBatch) else frozenset()
        if planned:
            await scheduler.store_new(planned, webhooks, frozenset(events[i].id for i in again))
        # After the batch's own deliveries are stored, so none of them escapes it.
        for event in events:
            if is_redaction(event.event_type, event.metadata):
                erase = partial(
                    repo.erase_pass_copies, event.account_id, event.mode, event.pass_id, event.id
                )
                await erase()
                erase_again.schedule(erase)

    return [
        EventBatchConsumer(
            broker,
            WEBHOOKS_CONSUMER,
            fan_out,
            batch_size=BATCH_EVENTS,
            in_flight=IN_FLIGHT,
            max_in_hand=IN_HAND_PER_FETCHER,
        )
        for _ in range(FETCHERS)
    ]
