"""Resend and recover: an operator asks for attempts outside the retry schedule.

Neither sends anything itself. Both set `manual_at` (now) on deliveries, which asks the
scheduler for one attempt whatever the delivery's status (shared/models.py DeliveryRecord), and
wake this replica's scheduler so the attempt goes out at once rather than at the next poll
(another replica's poll finds it too). So a resend or a recover is as durable as any delivery
(it is in MongoDB before the answer) and goes through the same claims, leases, limits and
network checks as a scheduled attempt.

Only the webhook's own deliveries, of its account and mode, are touched: a delivery id of
another webhook, account or mode answers 404 like one that does not exist. A disabled webhook
is refused (400 `webhook_disabled`): nothing would be sent to it.
"""

from collections.abc import Callable

from pymongo import ASCENDING, DESCENDING, ReturnDocument

from shared.clock import Clock
from shared.errors import InvalidRequest, not_found
from shared.messages import RecoverDeliveries, ResendDelivery, WebhookRecovery
from shared.models import DeliveryRecord
from shared.mongo import Database

# What a recover re-queues: deliveries whose attempts are over or that wait for a retry.
RECOVERABLE = ("failed", "dead")


class DeliveryOperations:
    def __init__(self, db: Database, clock: Clock, wake: Callable[[], None]):
        self._webhooks = db["webhooks"]
        self._deliveries = db["webhook_deliveries"]
        self._clock = clock
        self._wake = wake

    async def ensure_indexes(self) -> None:
        # A webhook's deliveries of one status, newest first: the listing's `status` filter
        # pages on it, and a recover reads the failed and dead ones through it (few, next to
        # the delivered ones) rather than the webhook's whole history.
        await self._deliveries.create_index(
            [("webhook_id", ASCENDING), ("status", ASCENDING), ("_id", DESCENDING)]
        )

    async def handle(
        self, command: ResendDelivery | RecoverDeliveries
    ) -> DeliveryRecord | WebhookRecovery:
        match command:
            case ResendDelivery():
                return await self.resend(command)
            case RecoverDeliveries():
                return await self.recover(command)

    async def resend(self, cmd: ResendDelivery) -> DeliveryRecord:
        await self._require_webhook(cmd.account_id, cmd.mode, cmd.webhook_id)
        doc = await self._deliveries.find_one_and_update(
            {
                "_id": cmd.delivery_id,
                "webhook_id": cmd.webhook_id,
                "account_id": cmd.account_id,
                "mode": cmd.mode,
            },
            {"$set": {"manual_at": self._clock.now()}},
            return_document=ReturnDocument.AFTER,
        )
        if doc is None:
            raise not_found("webhook delivery", cmd.delivery_id, "delivery_id")
        self._wake()
        return DeliveryRecord.model_validate(doc)

    async def recover(self, cmd: RecoverDeliveries) -> WebhookRecovery:
        await self._require_webhook(cmd.account_id, cmd.mode, cmd.webhook_id)
        now = self._clock.now()
        until = now if cmd.until is None else cmd.until
        if until < cmd.since:
            raise InvalidRequest(
                "until must not be earlier than since.", param="until", code="parameter_invalid"
            )
        result = await self._deliveries.update_many(
            {
                "webhook_id": cmd.webhook_id,
                "account_id": cmd.account_id,
                "mode": cmd.mode,
                "status": {"$in": list(RECOVERABLE)},
                "created_at": {"$gte": cmd.since, "$lt": until},
            },
            {"$set": {"manual_at": now}},
        )
        # Matched, not modified: a delivery already asked for at this very instant counts too.
        requeued = result.matched_count
        if requeued:
            self._wake()
        return WebhookRecovery(
            webhook_id=cmd.webhook_id,
            since=cmd.since,
            until=until,
            requeued=requeued,
            created_at=now,
        )

    async def _require_webhook(self, account_id: str, mode: str, webhook_id: str) -> None:
        found = await self._webhooks.find_one(
            {"_id": webhook_id, "account_id": account_id, "mode": mode}, {"enabled": 1}
        )
        if found is None:
            raise not_found("webhook", webhook_id)
        if not found.get("enabled", True):
            # Nothing is sent to a disabled webhook: the attempts asked for would be dropped
            # (and a failed delivery's retries ended), so say so instead of answering success.
            raise InvalidRequest(
                f"Webhook {webhook_id} is disabled; enable it first (PATCH enabled: true).",
                code="webhook_disabled",
            )
