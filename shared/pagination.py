"""Stripe-style cursor pages over time-sortable ids, newest first.

`starting_after=X` gives the page of objects older than X; `ending_before=X` the page of objects
newer than X (still newest first). `has_more` is exact: one extra document is read to know it.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pymongo import ASCENDING, DESCENDING

from shared.mongo import Document

T = TypeVar("T")


@dataclass(frozen=True)
class PageRequest:
    limit: int
    starting_after: str | None = None
    ending_before: str | None = None


@dataclass(frozen=True)
class Page(Generic[T]):
    items: list[T]
    has_more: bool


async def fetch_page(
    collection: Any, query: dict[str, Any], page: PageRequest, parse: Callable[[Document], T]
) -> Page[T]:
    """One page of `collection` under `query`, each document turned into a model by `parse`."""
    query = dict(query)
    if page.ending_before is not None:
        query["_id"] = {"$gt": page.ending_before}
        order = ASCENDING
    else:
        if page.starting_after is not None:
            query["_id"] = {"$lt": page.starting_after}
        order = DESCENDING
    cursor = collection.find(query).sort("_id", order).limit(page.limit + 1)
    documents = [doc async for doc in cursor]
    has_more = len(documents) > page.limit
    documents = documents[: page.limit]
    if order == ASCENDING:
        documents.reverse()
    return Page(items=[parse(doc) for doc in documents], has_more=has_more)
