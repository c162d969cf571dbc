"""A cache held in every replica of a service, and emptied on every replica before the change
that makes an entry wrong answers (first the api's principals; also the issuer's templates).

Reading what a request needs (a key and its plan, a template) costs a store round trip on
every request; each replica keeps the answer in memory instead. What makes that safe is how a
change reaches every replica (docs/architecture.md#caches-kept-coherent-across-replicas):

- Every replica subscribes to `<prefix>.>` (core NATS, no queue group: each gets every message,
  in the order the server received them) and publishes a heartbeat there every second. A
  replica uses its cache only while it holds a lease: three seconds from *sending* a heartbeat
  whose echo it received on the same connection (a replica cut off from NATS stops using its
  cache within three seconds; one that reconnected, and so may have missed messages, empties
  it first).
- A change writes MongoDB first, then `invalidate_tags` publishes an invalidation (tags: the
  entries it makes wrong) as a request. Each replica drops the entries carrying any of its
  tags and answers.
  The invalidator waits for its own copy of the invalidation: by then it has received every
  heartbeat the server ordered before it since it subscribed, so (once subscribed for longer
  than a lease) it knows every replica that may hold a lease. It then waits until each of them
  answered or until its lease ran out (its last heartbeat + three seconds, + one for the order
  two servers of a cluster may disagree on), whichever comes first: a replica's later
  heartbeats reach it after the invalidation, which it has applied by then. An invalidator that
  subscribed less than a lease ago also waits until that long has passed, for replicas it has
  not heard yet; so does one whose connection is new (a reconnect, perhaps to another node of
  a cluster: what was sent while it was away never reached it). A stopping replica stops
  answering from its cache before it says goodbye (the others stop waiting for it then).
- A cache fill races an invalidation: a read that began before the invalidation was applied is
  not stored (the generation counter changed meanwhile).

So the request after a change's answer sees the change on every replica. Should the invalidator
not hear its own invalidation back (NATS down), `invalidate_tags` raises InternalError
`service_unavailable`: the change is stored, and a retry repeats the invalidation. Entries also
expire (a minute by default), which bounds any case the above does not cover.
"""

import asyncio
import contextlib
import logging
import secrets
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, field
from typing import Annotated, Generic, Literal, TypeVar

from faststream.nats import NatsBroker
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.errors import Error as NatsError
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from shared.errors import InternalError

log = logging.getLogger(__name__)

V = TypeVar("V")

HEARTBEAT_SECONDS = 1.0
# A replica uses its cache for this long after sending a heartbeat it heard back; a revoker
# waits at most this long for a replica that does not answer.
LEASE_SECONDS = 3.0
# Added to a silent replica's lease by a revoker: on a NATS cluster two servers may order a
# heartbeat and an invalidation differently, by less than this.
ORDER_MARGIN_SECONDS = 1.0
# How long a revoker waits to hear its own invalidation back before answering 500.
ECHO_TIMEOUT_SECONDS = 2.0
ENTRY_SECONDS = 60.0
MAX_ENTRIES = 10_000


class Heartbeat(BaseModel):
    model_config = ConfigDict(frozen=True)

    type: Literal["heartbeat"] = "heartbeat"
    replica: str
    seq: int


class Goodbye(BaseModel):
    """A replica that stops: revokers need not wait for its lease."""

    model_config = ConfigDict(frozen=True)

    type: Literal["goodbye"] = "goodbye"
    replica: str


class Invalidation(BaseModel):
    """Drop the entries carrying any of `tags` (a revoked key, an account, a template)."""

    model_config = ConfigDict(frozen=True)

    type: Literal["invalidate"] = "invalidate"
    replica: str
    id: str
    tags: list[str]


class Ack(BaseModel):
    model_config = ConfigDict(frozen=True)

    replica: str


CacheMessage = Annotated[Heartbeat | Goodbye | Invalidation, Field(discriminator="type")]
_message: TypeAdapter[CacheMessage] = TypeAdapter(CacheMessage)
Callback = Callable[[Msg], Awaitable[None]]


@dataclass(frozen=True)
class CacheTimings:
    """The protocol's timings: how often a replica heartbeats, how long a heard heartbeat lets
    it use its cache, the margin for a NATS cluster's ordering, and how long an invalidator
    waits to hear its own invalidation. A change made by a replica that started less than
    `lease + order_margin` ago waits that long at most (for peers it has not heard yet)."""

    heartbeat: float
    lease: float
    order_margin: float
    echo_timeout: float


def default_timings() -> CacheTimings:
    """The module's constants, read when a cache is made (tests scale them down)."""
    return CacheTimings(
        HEARTBEAT_SECONDS, LEASE_SECONDS, ORDER_MARGIN_SECONDS, ECHO_TIMEOUT_SECONDS
    )


@dataclass
class _Entry(Generic[V]):
    value: V
    tags: frozenset[str]
    expires: float


@dataclass
class _Pending:
    """An invalidation this replica sent: who answered, and whether it came back to us."""

    acks: set[str] = field(default_factory=set)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    echoed: bool = False
    # Peers and when their last heartbeat (ordered before the invalidation) arrived.
    peers: dict[str, float] = field(default_factory=dict)


class CoherentCache(Generic[V]):
    """The cache and its NATS side (a worker for shared.connections.running)."""

    def __init__(
        self,
        broker: NatsBroker,
        subject_prefix: str,
        replica: str,
        *,
        name: str,
        entry_seconds: float = ENTRY_SECONDS,
        max_entries: int = MAX_ENTRIES,
        timings: CacheTimings | None = None,
    ) -> None:
        self._broker = broker
        self._timings = timings or default_timings()
        self._prefix = subject_prefix
        self._name = name  # in log lines and the heartbeat task's name
        self.replica = f"{replica}-{secrets.token_hex(4)}"
        self._entry_seconds = entry_seconds
        self._max_entries = max_entries
        self._entries: OrderedDict[str, _Entry[V]] = OrderedDict()
        # Bumped by every invalidation: a fill that began under another generation is dropped.
        self.generation = 0
        self._fresh_until = 0.0
        self._stopping = False
        self._connection_epoch: int | None = None
        self._sent: dict[int, tuple[float, int]] = {}
        self._seq = 0
        self._peers: dict[str, float] = {}
        self._pending: dict[str, _Pending] = {}
        self._task: asyncio.Task[None] | None = None
        self._subscription: Subscription | None = None
        # When the subscription took effect on the connection `_listening_epoch`: heartbeats
        # before it were not heard here (nor those sent while a reconnect was under way).
        self._listening_since: float | None = None
        self._listening_epoch: int | None = None

    # -- the cache ------------------------------------------------------------------------------

    def get(self, key: str) -> V | None:
        if not self.usable():
            return None
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry.expires <= time.monotonic():
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return entry.value

    def put(self, key: str, value: V, tags: Collection[str], generation: int) -> None:
        """Store what a read that began at `generation` found, to be dropped by an
        invalidation of any of `tags`, unless something was invalidated since (the read may
        predate the change)."""
        if generation != self.generation or not self.usable():
            return
        expires = time.monotonic() + self._entry_seconds
        self._entries[key] = _Entry(value, frozenset(tags), expires)
        self._entries.move_to_end(key)
        while len(self._entries) > self._max_entries:
            self._entries.popitem(last=False)

    def usable(self) -> bool:
        """Whether this replica may answer from its cache: it holds a lease, on the connection
        it had when the lease was taken."""
        if time.monotonic() >= self._fresh_until:
            return False
        connection = self._connection()
        return connection is not None and self._epoch(connection) == self._connection_epoch

    def _drop(self, tags: Collection[str]) -> None:
        self.generation += 1
        dropped = frozenset(tags)
        for key, entry in list(self._entries.items()):
            if entry.tags & dropped:
                del self._entries[key]

    def _clear(self) -> None:
        self.generation += 1
        self._entries.clear()

    # -- invalidation -----------------------------------------------------------------------

    async def invalidate_tags(self, tags: Collection[str]) -> None:
        """Drop the entries carrying any of `tags` on every replica; return once each replica
        applied it or can no longer use its cache. Call it after the store write."""
        self._drop(tags)
        connection = self._connection()
        if connection is None:
            raise _unconfirmed()
        message = Invalidation(replica=self.replica, id=secrets.token_hex(8), tags=sorted(tags))
        pending = self._pending[message.id] = _Pending()
        replies: Subscription | None = None
        try:
            try:
                inbox = connection.new_inbox()
                replies = await connection.subscribe(inbox, cb=self._ack_handler(pending))
                body = message.model_dump_json().encode()
                await connection.publish(f"{self._prefix}.invalidate", body, reply=inbox)
            except (NatsError, OSError) as exc:
                raise _unconfirmed() from exc
            await self._wait_for_echo(pending)
            await self._wait_for_peers(pending, self._listening_on(connection))
        finally:
            del self._pending[message.id]
            if replies is not None:
                with contextlib.suppress(Exception):
                    await replies.unsubscribe()

    def _ack_handler(self, pending: _Pending) -> Callback:
        async def on_ack(msg: Msg) -> None:
            try:
                ack = Ack.model_validate_json(msg.data)
            except ValidationError:
                return
            pending.acks.add(ack.replica)
            pending.changed.set()

        return on_ack

    async def _wait_for_echo(self, pending: _Pending) -> None:
        deadline = time.monotonic() + self._timings.echo_timeout
        while not pending.echoed:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _unconfirmed()
            pending.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(pending.changed.wait(), remaining)

    def _listening_on(self, connection: Client) -> float:
        """Since when this replica has heard the others on `connection`. A new connection (a
        reconnect, perhaps to another node of a cluster) heard nothing sent while it was
        away: it listens from when it was first seen here."""
        epoch = self._epoch(connection)
        if self._listening_since is None:
            return time.monotonic()
        if epoch != self._listening_epoch:
            self._listening_since, self._listening_epoch = time.monotonic(), epoch
        return self._listening_since

    async def _wait_for_peers(self, pending: _Pending, listening_since: float) -> None:
        lease = self._timings.lease + self._timings.order_margin
        # Replicas heard of only before this one listened may hold a lease for this long.
        unheard = listening_since + lease
        while True:
            now = time.monotonic()
            waiting = [
                seen + lease
                for peer, seen in pending.peers.items()
                if peer not in pending.acks and seen + lease > now
            ]
            if unheard > now:
                waiting.append(unheard)
            if not waiting:
                return
            pending.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(pending.changed.wait(), min(waiting) - now)

    # -- the NATS side ------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=self._name)

    async def stop(self) -> None:
        # No answer from the cache once the others may stop waiting for this replica.
        self._stopping = True
        self._fresh_until = 0.0
        connection = self._connection()
        if connection is not None:
            with contextlib.suppress(Exception):
                goodbye = Goodbye(replica=self.replica).model_dump_json().encode()
                await connection.publish(f"{self._prefix}.goodbye", goodbye)
                await connection.flush(timeout=1)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._subscription is not None:
            with contextlib.suppress(Exception):
                await self._subscription.unsubscribe()
        self._fresh_until = 0.0

    async def _run(self) -> None:
        while True:
            try:
                await self._heartbeats()
            except (NatsError, OSError) as exc:
                # NATS away: no heartbeat comes back, so the lease (and the cache) lapses.
                log.warning("%s: no heartbeat sent (%s); retrying", self._name, exc)
                await asyncio.sleep(self._timings.heartbeat)
            except Exception:
                log.exception("%s: heartbeats failed; retrying", self._name)
                await asyncio.sleep(self._timings.heartbeat)

    async def _heartbeats(self) -> None:
        connection = self._connection()
        if connection is None:
            await asyncio.sleep(self._timings.heartbeat)
            return
        if self._subscription is None:
            self._subscription = await connection.subscribe(
                f"{self._prefix}.>", cb=self._on_message
            )
        if self._listening_since is None:
            await connection.flush()  # the server has the subscription from here on
            self._listening_since = time.monotonic()
            self._listening_epoch = self._epoch(connection)
        while True:
            self._seq += 1
            self._sent[self._seq] = (time.monotonic(), self._epoch(connection))
            for old in [seq for seq in self._sent if seq < self._seq - 10]:
                del self._sent[old]
            beat = Heartbeat(replica=self.replica, seq=self._seq)
            heartbeats = f"{self._prefix}.heartbeat"
            await connection.publish(heartbeats, beat.model_dump_json().encode())
            await asyncio.sleep(self._timings.heartbeat)

    async def _on_message(self, msg: Msg) -> None:
        try:
            message = _message.validate_json(msg.data)
        except ValidationError:
            log.warning("%s: ignoring a malformed message on %s", self._name, msg.subject)
            return
        match message:
            case Heartbeat():
                self._on_heartbeat(message)
            case Goodbye():
                self._peers.pop(message.replica, None)
            case Invalidation():
                await self._on_invalidation(message, msg.reply)

    def _on_heartbeat(self, beat: Heartbeat) -> None:
        now = time.monotonic()
        if beat.replica != self.replica:
            self._peers[beat.replica] = now
            return
        connection = self._connection()
        sent = self._sent.pop(beat.seq, None)
        if connection is None or sent is None:
            return
        epoch = self._epoch(connection)
        if epoch != self._connection_epoch:
            # A new connection: what was published while this replica was away is lost.
            self._clear()
            self._connection_epoch = epoch
        sent_at, sent_epoch = sent
        if sent_epoch == epoch and not self._stopping:
            self._fresh_until = max(self._fresh_until, sent_at + self._timings.lease)
        for peer, seen in list(self._peers.items()):
            if seen + self._timings.lease * 10 < now:
                del self._peers[peer]  # long gone: forget it

    async def _on_invalidation(self, message: Invalidation, reply: str) -> None:
        self._drop(message.tags)
        pending = self._pending.get(message.id)
        if pending is not None and message.replica == self.replica:
            pending.echoed = True
            pending.peers = dict(self._peers)
            pending.changed.set()
            return
        connection = self._connection()
        if reply and connection is not None:
            await connection.publish(reply, Ack(replica=self.replica).model_dump_json().encode())

    def _connection(self) -> Client | None:
        try:
            connection: Client = self._broker.connection
        except Exception:  # not connected yet
            return None
        return connection if connection.is_connected else None

    @staticmethod
    def _epoch(connection: Client) -> int:
        """Which connection this is: the client's count of reconnections."""
        return int(connection.stats["reconnects"])


def _unconfirmed() -> InternalError:
    return InternalError(
        "The change is stored, but not every replica confirmed it yet; retry the request.",
        code="service_unavailable",
    )
