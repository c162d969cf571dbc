"""MongoDB connection helper: one client per process, created in a lifespan, closed there.

Every client reports the commands it sends (PyMongo's command monitoring) once the process
opted in with `count_commands` (shared/metrics.py `instrument` does, for every service, into
`tessera_mongodb_commands_total{service, command, origin}`), where `origin` says what sent the
command (`command_origin`): an HTTP request, a NATS command, a JetStream consumer, or background
work (relays, pollers, scrapes). That is how docs/performance.md counts the store round trips of
one request, and what tests/e2e/test_round_trips.py holds to its documented figure.
"""

from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Literal

from pymongo import AsyncMongoClient, WriteConcern
from pymongo.asynchronous.client_session import AsyncClientSession
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import (
    BulkWriteError,
    ClientBulkWriteException,
    OperationFailure,
    PyMongoError,
)
from pymongo.monitoring import (
    CommandFailedEvent,
    CommandListener,
    CommandStartedEvent,
    CommandSucceededEvent,
)

Document = dict[str, Any]
MongoClient = AsyncMongoClient[Document]
Database = AsyncDatabase[Document]


def create_client(url: str, listeners: Sequence[CommandListener] = ()) -> MongoClient:
    """A client whose writes are acknowledged only once they are in the store's journal
    (writeConcern j:true), so a crash of the store loses nothing that was acknowledged; a
    `journal=` option in the URL decides instead (docs/operations.md). `listeners`: more
    command listeners (a test's)."""
    options: dict[str, Any] = {"journal": True}
    if "journal=" in url.lower():
        options = {}
    # tz_aware so every datetime read back is UTC-aware, like the ones written.
    return AsyncMongoClient(
        url,
        tz_aware=True,
        uuidRepresentation="standard",
        event_listeners=[_COUNTER, *listeners],
        **options,
    )


Origin = Literal["http", "command", "consumer", "background"]
# What the current task is doing, for the command counter: set by the HTTP metrics middleware,
# the NATS command handler and the consumers; anything else (relays, pollers) is background.
command_origin: ContextVar[Origin] = ContextVar("command_origin", default="background")


@contextmanager
def origin(value: Origin) -> Iterator[None]:
    """Count the commands sent inside the block as coming from `value`."""
    token = command_origin.set(value)
    try:
        yield
    finally:
        command_origin.reset(token)


CountCommand = Callable[[str, Origin], None]


class _CommandCounter(CommandListener):
    """Reports each command as it starts. PyMongo calls a listener in the task that sends the
    command, so `command_origin` is that task's; in a process that did not opt in (a tool, a
    test's own client) it does nothing."""

    count: CountCommand | None = None

    def started(self, event: CommandStartedEvent) -> None:
        if self.count is not None:
            self.count(event.command_name, command_origin.get())

    def succeeded(self, event: CommandSucceededEvent) -> None:
        pass

    def failed(self, event: CommandFailedEvent) -> None:
        pass


_COUNTER = _CommandCounter()


# The server's code for a write refused by a unique index.
DUPLICATE_KEY = 11000


def count_commands(count: CountCommand | None) -> None:
    """Call `count(command_name, origin)` for every MongoDB command this process sends from now
    on (its clients are created with the listener; it costs nothing until this is called);
    None stops counting."""
    _COUNTER.count = count


def duplicates_only(exc: BulkWriteError) -> set[int]:
    """The positions an unordered `insert_many` refused as duplicate keys (documents stored
    before: a redelivery); re-raises `exc` when anything else failed."""
    errors = exc.details.get("writeErrors", [])
    refused = any(e.get("code") != DUPLICATE_KEY for e in errors)
    if exc.details.get("writeConcernErrors") or refused:
        raise exc
    return {int(error["index"]) for error in errors}


def unjournaled(collection: AsyncCollection[Document]) -> AsyncCollection[Document]:
    """The collection with writes acknowledged before they reach the journal, when the client
    uses the default j:true (an operator's own write concern is left alone).

    Only for writes whose loss in a store crash costs nothing that was promised: rate-limit and
    quota counters, and idempotency records, which are always followed by a journaled commit of
    the command they guard (the store's log is sequential, so that commit makes them durable
    too) or guard a command that never committed."""
    if collection.write_concern.document != {"j": True}:
        return collection
    return collection.with_options(write_concern=WriteConcern())


WRITE_CONFLICT = 112
INDEX_NOT_FOUND = 27


async def drop_index_if_present(collection: AsyncCollection[Document], name: str) -> None:
    """Drop an index a release no longer uses (every index costs each write of the
    collection); a store without it, or where another replica dropped it first, is fine.
    Its absence is read first: a drop is a schema change (on the development store it takes
    its global lock), which every start after the first would otherwise make for nothing."""
    names = [index["name"] async for index in await collection.list_indexes()]
    if name not in names:
        return
    try:
        await collection.drop_index(name)
    except OperationFailure as exc:
        if exc.code != INDEX_NOT_FOUND and "index not found" not in str(exc).lower():
            raise


def is_write_conflict(exc: PyMongoError) -> bool:
    """A transaction to run again from the start: it lost a write conflict (with a concurrent
    transaction, or one a killed process left open), or its connection to the store failed
    before the commit (the driver labels both TransientTransactionError, and MongoDB's answer
    to both is to run the whole transaction again), or the commit's outcome is unknown (a
    retry finds what committed: every transaction here is idempotent by its command id or
    its lease token)."""
    if isinstance(exc, ClientBulkWriteException):
        # Several writes in one command (shared/pending_writes.py): the error that ended it
        # carries the labels; a write error may be the conflict itself.
        if isinstance(exc.error, PyMongoError) and is_write_conflict(exc.error):
            return True
        errors = exc.details.get("writeErrors") or []
        if any(error.get("code") == WRITE_CONFLICT for error in errors):
            return True
    return (
        exc.has_error_label("TransientTransactionError")
        or exc.has_error_label("UnknownTransactionCommitResult")
        or (isinstance(exc, OperationFailure) and exc.code == WRITE_CONFLICT)
    )


async def write_in_transaction(
    client: MongoClient, write: Callable[[AsyncClientSession], Awaitable[object]]
) -> bool:
    """Run a write to documents that transactions also write in a transaction of its own: a
    conflict then fails it at once (False; the caller tries again later), where a plain write
    makes the store retry it until the other transaction ends. SecantusDB retries such a write
    while holding locks the other transaction needs to commit, and both stalled for 30 s and
    more (docs/architecture.md#workers); MongoDB makes it wait, so this costs it nothing.
    For the leases of workers (job chunks, the Google step) on documents commands change."""
    try:
        async with client.start_session() as session, await session.start_transaction():
            await write(session)
    except PyMongoError as exc:
        if is_write_conflict(exc):
            return False
        raise
    return True
