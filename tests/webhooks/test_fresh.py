"""FreshWebhooks (services/webhooks/fresh.py): attempts that waited share one read of their
webhook while it is young enough, renew it in the background once it is half as old, read
again (and wait) once it is too old, and never reuse a failed read."""

import asyncio

import pytest

from services.webhooks.fresh import FreshWebhooks
from shared.models import WebhookRecord
from tests.webhooks.records import webhook


class Store:
    """The webhooks as the store has them now, and the reads asked of it."""

    def __init__(self, *hooks: WebhookRecord) -> None:
        self.hooks = {hook.id: hook for hook in hooks}
        self.reads: list[set[str]] = []
        self.failing = False
        self.answer = asyncio.Event()  # the store answers while it is set
        self.answer.set()

    async def read(self, ids: set[str]) -> dict[str, WebhookRecord]:
        self.reads.append(set(ids))
        await asyncio.sleep(0)  # a round trip: attempts arriving meanwhile share it
        await self.answer.wait()
        if self.failing:
            raise ConnectionError("store unreachable")
        return {key: self.hooks[key] for key in ids if key in self.hooks}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_attempts_share_a_read_while_it_is_young_then_read_again() -> None:
    hook = webhook(url="https://example.com/a")
    store, clock = Store(hook), Clock()
    fresh = FreshWebhooks(store.read, 0.5, clock)

    together = await asyncio.gather(*(fresh.get(hook.id) for _ in range(5)))
    store.hooks[hook.id] = hook.model_copy(update={"url": "https://example.com/b"})
    clock.now += 0.4
    still_young = await fresh.get(hook.id)  # and a read in the background, not waited for
    clock.now += 0.2
    read_again = await fresh.get(hook.id)  # the first read is too old: the newer one serves

    assert [found.url for found in together if found] == ["https://example.com/a"] * 5
    assert still_young is not None
    assert still_young.url == "https://example.com/a"
    assert read_again is not None
    assert read_again.url == "https://example.com/b"
    assert store.reads == [{hook.id}, {hook.id}]


async def test_a_deleted_webhook_reads_as_none() -> None:
    fresh = FreshWebhooks(Store().read, 0.5, Clock())
    assert await fresh.get("whk_gone") is None


async def test_a_failed_read_fails_its_attempts_and_is_not_reused() -> None:
    hook = webhook()
    store = Store(hook)
    fresh = FreshWebhooks(store.read, 0.5, Clock())
    store.failing = True
    with pytest.raises(ConnectionError):
        await fresh.get(hook.id)
    store.failing = False
    assert await fresh.get(hook.id) == hook
    assert len(store.reads) == 2


async def test_an_aging_read_is_renewed_without_making_attempts_wait() -> None:
    hook = webhook(url="https://example.com/a")
    store, clock = Store(hook), Clock()
    fresh = FreshWebhooks(store.read, 0.5, clock)
    await fresh.get(hook.id)
    store.hooks[hook.id] = hook.model_copy(update={"url": "https://example.com/b"})
    store.answer.clear()  # the store is slow to answer the renewal

    clock.now += 0.3
    served = await asyncio.wait_for(fresh.get(hook.id), timeout=5)
    store.answer.set()
    clock.now += 0.3
    renewed = await asyncio.wait_for(fresh.get(hook.id), timeout=5)

    assert served is not None
    assert served.url == "https://example.com/a"  # 0.3 s old: still fresh enough
    assert renewed is not None
    assert renewed.url == "https://example.com/b"
    assert len(store.reads) == 2
