"""Authenticated principals cached in each api replica, and revoked everywhere before the revoke
answers.

Authenticating a key costs two store reads (the key, then its account's plan) on every request;
the cache keeps the answer per key hash, so a replica reads them once per key and minute. It is
a shared.coherent_cache.CoherentCache on `tessera.api.principals.>`: revoking a key or changing
a plan writes MongoDB first, then invalidates the key's (or the account's) entries on every
replica before it answers (docs/architecture.md#caches-kept-coherent-across-replicas), so the
request after a revocation's answer is refused on every replica.
"""

from faststream.nats import NatsBroker

from services.api.accounts import Principal, authenticate, hash_key, key_mode
from services.api.repository import ApiRepository
from shared.coherent_cache import CoherentCache

SUBJECT_PREFIX = "tessera.api.principals"


class PrincipalCache(CoherentCache[Principal]):
    def __init__(self, broker: NatsBroker, replica: str | None = None) -> None:
        super().__init__(broker, SUBJECT_PREFIX, replica or "api", name="principal cache")

    async def authenticate(self, repo: ApiRepository, presented: str | None) -> Principal:
        """`accounts.authenticate`, answered from the cache when this replica may."""
        key_hash = hash_key(presented) if presented and key_mode(presented) else None
        if key_hash is not None and (cached := self.get(key_hash)) is not None:
            return cached
        generation = self.generation
        principal = await authenticate(repo, presented)
        if key_hash is not None:
            self.put(key_hash, principal, tags_of(principal), generation)
        return principal

    async def invalidate(self, *, key_id: str | None = None, account_id: str | None = None) -> None:
        """Drop a key's (or an account's) entries on every replica; return once each replica
        applied it or can no longer use its cache. Call it after the store write."""
        tags = [f"key:{key_id}"] if key_id is not None else []
        if account_id is not None:
            tags.append(f"account:{account_id}")
        await self.invalidate_tags(tags)


def tags_of(principal: Principal) -> list[str]:
    """What invalidates a principal: its key, and its account."""
    return [f"key:{principal.key_id}", f"account:{principal.account_id}"]
