"""Pass events the events service observes itself: Apple Wallet registrations and deliveries,
Google Wallet callbacks.

They go to the service's own outbox, `events_outbox` (shared/outbox.py), in the transaction of
the write they report (a registration, a nonce), so a crash between the write and the publish
loses nothing; the service's relay publishes them to the events stream, and its own consumer
records them from there, so webhooks see them too.
"""

from shared.mongo import Database
from shared.outbox import Outbox

OWNER = "events"
COLLECTION = "events_outbox"


def events_outbox(db: Database) -> Outbox:
    return Outbox(db, owner=OWNER, name=COLLECTION)
