"""Accounts and modes without webhooks, known in each webhooks replica so that their events cost
no store read, and forgotten on every replica before a webhook is created or changed.

Every batch of events the webhooks consumer takes reads the webhooks of each account and mode
in it (services/webhooks/delivery.py `plan_deliveries`): a store round trip per batch even
where no webhook exists, which is most events of most accounts (an import of 10,000 passes,
a rollout). This cache remembers only that a scope has none: a webhook that exists is always
read from the store, as it is, so nothing about it (its url, its secrets, its health) can be
stale here. It is a shared.coherent_cache.CoherentCache on `tessera.webhooks.scopes.>`: a
create or an update of a webhook (the only changes that can give a scope a deliverable webhook:
a new one, or one enabled again) commits, then drops the scope on every replica before it
answers, so an event after that answer is fanned out to it on every replica
(docs/architecture.md#caches-kept-coherent-across-replicas).
"""

from faststream.nats import NatsBroker

from services.webhooks.repository import WebhookRepository
from shared.coherent_cache import CacheTimings, CoherentCache
from shared.models import WebhookRecord

SUBJECT_PREFIX = "tessera.webhooks.scopes"
# As the issuer's template cache: a create or PATCH made by a replica that started less than a
# lease and margin ago waits that long for peers it has not heard yet.
TIMINGS = CacheTimings(heartbeat=0.25, lease=1.0, order_margin=0.5, echo_timeout=2.0)


def _scope(account_id: str, mode: str) -> str:
    return f"{account_id}:{mode}"


class QuietScopes(CoherentCache[bool]):
    def __init__(self, broker: NatsBroker, replica: str | None = None) -> None:
        super().__init__(
            broker, SUBJECT_PREFIX, replica or "webhooks", name="quiet scopes", timings=TIMINGS
        )

    async def webhooks(
        self, repo: WebhookRepository, account_id: str, mode: str
    ) -> list[WebhookRecord]:
        """`repo.deliverable(account_id, mode)`, or none without a read when this replica
        may know the scope has none."""
        scope = _scope(account_id, mode)
        if self.get(scope):
            return []
        generation = self.generation
        hooks = await repo.deliverable(account_id, mode)
        if not hooks:
            self.put(scope, True, [scope], generation)
        return hooks

    async def changed(self, account_id: str, mode: str) -> None:
        """A webhook of the scope was created or changed (committed): the scope is read again
        on every replica once this returns."""
        await self.invalidate_tags([_scope(account_id, mode)])
