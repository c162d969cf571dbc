"""Templates cached in each issuer replica for the commands that issue passes, and emptied on
every replica before a template change answers.

Every POST /v1/passes, batch and import chunk reads its template; the cache keeps it in memory
per template id, so a steady stream of passes costs no template read. It is a
shared.coherent_cache.CoherentCache on `tessera.issuer.templates.>`: an `update_template`
command (a design change, an archive, a new redemption policy) commits, then drops the template
on every replica before it answers, so the command after that answer sees the change on every
replica (docs/architecture.md#caches-kept-coherent-across-replicas). A pass being made from
the old design while it changed is rolled out by the design change's sweep
(docs/templates.md#passes-made-while-the-design-changes).
"""

from faststream.nats import NatsBroker

from services.issuer.repository import IssuerRepository
from shared.coherent_cache import CacheTimings, CoherentCache
from shared.models import TemplateRecord

SUBJECT_PREFIX = "tessera.issuer.templates"
# Shorter than the principal cache's (1 s, 3 s, 1 s): a template PATCH made by an issuer that
# started less than a lease and margin ago waits that long for peers it has not heard yet, and
# such a PATCH is an API request (a revocation is an operator's call).
TIMINGS = CacheTimings(heartbeat=0.25, lease=1.0, order_margin=0.5, echo_timeout=2.0)


class TemplateCache(CoherentCache[TemplateRecord]):
    def __init__(self, broker: NatsBroker, replica: str | None = None) -> None:
        super().__init__(
            broker, SUBJECT_PREFIX, replica or "issuer", name="template cache", timings=TIMINGS
        )

    async def template(
        self, repo: IssuerRepository, account_id: str, mode: str, template_id: str
    ) -> TemplateRecord | None:
        """`repo.template`, answered from the cache when this replica may. The record is
        shared: callers read it and never change it."""
        cached = self.get(template_id)
        if cached is not None:
            return cached if (cached.account_id, cached.mode) == (account_id, mode) else None
        generation = self.generation
        record = await repo.template(account_id, mode, template_id)
        if record is not None:
            self.put(template_id, record, [template_id], generation)
        return record

    async def changed(self, template_id: str) -> None:
        """The template was changed (committed): dropped on every replica once this returns."""
        await self.invalidate_tags([template_id])
