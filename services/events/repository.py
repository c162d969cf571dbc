"""Every MongoDB call of the events service: the `pass_events` collection."""

from pymongo import ASCENDING, DESCENDING
from pymongo.errors import DuplicateKeyError

from shared.models import PassEventRecord
from shared.mongo import Database
from shared.pagination import Page, PageRequest, fetch_page


class EventsRepository:
    def __init__(self, db: Database):
        self._events = db["pass_events"]

    async def ensure_indexes(self) -> None:
        scope = [("account_id", ASCENDING), ("mode", ASCENDING)]
        await self._events.create_index([*scope, ("_id", DESCENDING)])
        await self._events.create_index([*scope, ("pass_id", ASCENDING), ("_id", DESCENDING)])

    async def record(self, event: PassEventRecord) -> bool:
        """Store an event once; False when its id was already recorded (a redelivery)."""
        try:
            await self._events.insert_one(event.to_document())
        except DuplicateKeyError:
            return False
        return True


class EventReads:
    """Read-only queries the api runs against `pass_events`."""

    def __init__(self, db: Database):
        self._events = db["pass_events"]

    async def page(
        self, account_id: str, mode: str, page: PageRequest, pass_id: str | None = None
    ) -> Page:
        query = {"account_id": account_id, "mode": mode}
        if pass_id is not None:
            query["pass_id"] = pass_id
        return await fetch_page(self._events, query, page)
