"""Reading a stack's MongoDB directly, to check what is (and is not) stored."""

import secrets
from collections.abc import AsyncIterator, Iterable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from pymongo import AsyncMongoClient, MongoClient
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.monitoring import (
    CommandFailedEvent,
    CommandListener,
    CommandStartedEvent,
    CommandSucceededEvent,
)
from pymongo.synchronous.database import Database

from shared.mongo import Document, count_commands, create_client
from tests.support.stack import Stack


def dump(stack: Stack) -> str:
    """Every document of every collection of the stack's database, as one string."""
    mongo: MongoClient[dict[str, Any]]
    with MongoClient(stack.mongo_url) as mongo:
        db: Database[dict[str, Any]] = mongo[stack.database]
        return repr([list(db[name].find()) for name in db.list_collection_names()])


@contextmanager
def stack_db(stack: Stack) -> Iterator[Database[dict[str, Any]]]:
    """The stack's database, through a client closed at the end of the block."""
    mongo: MongoClient[dict[str, Any]]
    with MongoClient(stack.mongo_url) as mongo:
        yield mongo[stack.database]


@contextmanager
def commands_sent() -> Iterator[list[str]]:
    """The names of the MongoDB commands this process sends inside the block, in order
    (shared.mongo.count_commands)."""
    sent: list[str] = []
    count_commands(lambda command, _: sent.append(command))
    try:
        yield sent
    finally:
        count_commands(None)


@asynccontextmanager
async def scratch_database(
    client: AsyncMongoClient[Document], collections: Iterable[str] = ()
) -> AsyncIterator[AsyncDatabase[Document]]:
    """A database of its own for one test, with `collections` made first (as the services'
    indexes make theirs), dropped afterwards."""
    database = client[f"t_{secrets.token_hex(6)}"]
    for name in collections:
        await database.create_collection(name)
    try:
        yield database
    finally:
        await client.drop_database(database.name)


class _FindRecorder(CommandListener):
    def __init__(self) -> None:
        self.finds: list[tuple[str, dict[str, Any]]] = []

    def started(self, event: CommandStartedEvent) -> None:
        if event.command_name == "find":
            self.finds.append((str(event.command["find"]), dict(event.command["filter"])))

    def succeeded(self, event: CommandSucceededEvent) -> None:
        pass

    def failed(self, event: CommandFailedEvent) -> None:
        pass


@asynccontextmanager
async def recording_finds(
    mongo_url: str,
) -> AsyncIterator[tuple[AsyncMongoClient[Document], list[tuple[str, dict[str, Any]]]]]:
    """A client of the store (services' options) and the (collection, filter) of every find it
    sends, in order: what a test explains to see which plan a service's query gets."""
    recorder = _FindRecorder()
    client = create_client(mongo_url, listeners=[recorder])
    try:
        yield client, recorder.finds
    finally:
        await client.close()
