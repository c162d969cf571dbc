"""What other services may read of the events service's data: the only module of it they import.

The queries use the indexes `EventsRepository.ensure_indexes` and `DeviceLogs.ensure_indexes`
make, and answer read models from shared/, never raw documents.
"""

from shared.models import PassEventRecord
from shared.mongo import Database
from shared.pagination import Page, PageRequest, fetch_page
from shared.views import DeviceLogView


class EventReads:
    """Recorded pass events, newest first (`GET /v1/events`, `GET /v1/passes/:id/events`)."""

    def __init__(self, db: Database):
        self._events = db["pass_events"]

    async def page(
        self,
        account_id: str,
        mode: str,
        page: PageRequest,
        pass_id: str | None = None,
        event_type: str | None = None,
    ) -> Page[PassEventRecord]:
        query = {"account_id": account_id, "mode": mode}
        if pass_id is not None:
            query["pass_id"] = pass_id
        if event_type is not None:
            query["type"] = event_type
        return await fetch_page(self._events, query, page, PassEventRecord.model_validate)


class DeviceLogReads:
    """What Apple Wallet devices posted to /v1/log (the operator's `GET /admin/v1/device_logs`)."""

    def __init__(self, db: Database):
        self._logs = db["device_logs"]

    async def page(self, page: PageRequest) -> Page[DeviceLogView]:
        return await fetch_page(self._logs, {}, page, DeviceLogView.model_validate)
