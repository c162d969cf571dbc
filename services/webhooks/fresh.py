"""Webhook records fresh enough for an attempt about to start.

A delivery carries a copy of its webhook from the moment it was claimed (or its event fanned
out), and may then wait minutes for a sending slot behind a slow endpoint. Its attempt must
not use a copy that old: a rotation with no grace period, a new URL, a disable or a delete
apply to every attempt that starts after them (docs/webhooks.md#changes-reach-waiting-deliveries).
So an attempt that waited takes its webhook from a read that started at most `max_age`
seconds ago. The attempts of one webhook share those reads, and a read is renewed in the
background once it is half that old, so a busy webhook costs about two reads per `max_age`
per replica and its attempts almost never wait for one (they did, every `max_age`, holding
their sending slots idle meanwhile: a quarter of the throughput at capacity).
"""

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from shared.models import WebhookRecord

ReadWebhooks = Callable[[set[str]], Awaitable[dict[str, WebhookRecord]]]


@dataclass(frozen=True)
class _Read:
    started: float
    task: asyncio.Task[WebhookRecord | None]


@dataclass(frozen=True)
class _Found:
    started: float  # when the read that found it started
    record: WebhookRecord | None  # None: deleted


class FreshWebhooks:
    def __init__(
        self,
        read: ReadWebhooks,
        max_age: float,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self._read = read
        self._max_age = max_age
        self._now = now
        self._latest: dict[str, _Read] = {}  # each webhook's newest read, done or not
        self._found: dict[str, _Found] = {}  # what its newest finished read found
        self._pruned_at = now()

    async def get(self, webhook_id: str) -> WebhookRecord | None:
        """The webhook as a read started at most `max_age` seconds ago found it (None:
        deleted). A failed read fails the attempts that waited for it, and is not reused."""
        now = self._now()
        self._prune(now)
        found = self._found.get(webhook_id)
        if found is not None and now - found.started <= self._max_age:
            if now - found.started > self._max_age / 2:
                self._renew(webhook_id, found.started, now)
            return found.record
        latest = self._latest.get(webhook_id)
        if latest is None or now - latest.started > self._max_age:
            latest = self._start(webhook_id, now)
        return await asyncio.shield(latest.task)

    def _renew(self, webhook_id: str, found_started: float, now: float) -> None:
        """A read in the background, unless one newer than what was found is under way."""
        latest = self._latest.get(webhook_id)
        if latest is None or latest.started <= found_started:
            self._start(webhook_id, now)

    def _start(self, webhook_id: str, now: float) -> _Read:
        task = asyncio.get_running_loop().create_task(self._read_one(webhook_id))
        read = self._latest[webhook_id] = _Read(now, task)
        task.add_done_callback(lambda done: self._finished(webhook_id, read))
        return read

    async def _read_one(self, webhook_id: str) -> WebhookRecord | None:
        return (await self._read({webhook_id})).get(webhook_id)

    def _finished(self, webhook_id: str, read: _Read) -> None:
        if read.task.cancelled() or read.task.exception() is not None:
            if self._latest.get(webhook_id) is read:
                del self._latest[webhook_id]  # the next attempt reads again
            return
        found = self._found.get(webhook_id)
        if found is None or found.started < read.started:
            self._found[webhook_id] = _Found(read.started, read.task.result())

    def _prune(self, now: float) -> None:
        """Forget, every `max_age`, the reads too old to serve (webhooks no longer sent to)."""
        if now - self._pruned_at < self._max_age:
            return
        self._pruned_at = now
        cutoff = now - self._max_age
        self._found = {key: f for key, f in self._found.items() if f.started >= cutoff}
        self._latest = {
            key: r for key, r in self._latest.items() if r.started >= cutoff or not r.task.done()
        }
