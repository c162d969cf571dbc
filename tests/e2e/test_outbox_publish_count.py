"""Issue 11, acceptance point 4: with two replicas of every service, each outbox document is
published once in the steady state (no crash), not once per replica.

A core NATS subscription on `tessera.events.>` and `tessera.live.>`, opened before anything is
issued, sees every publish (JetStream's duplicate window only keeps a second copy out of the
stream, and the consumers' unique `_id` out of the record). Passes are created, updated and
viewed by concurrent clients, so both issuer and both api replicas commit events and wake
their relays while the other's relay is claiming. Every event is then counted: each `created`
and `url_viewed` once on the events stream (from the issuer's and the api's outbox), each
update once on the live-updates queue (the issuer's outbox) and once on the events stream
(published by the events service after the push).
"""

import asyncio
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx2
import nats
import pytest
from nats.aio.client import Client
from nats.aio.msg import Msg
from pymongo import MongoClient
from pymongo.synchronous.database import Database

from tests.support.polling import poll
from tests.support.stack import Account, Stack

pytestmark = pytest.mark.e2e
PASSES = 40
UPDATES = 15
VIEWS = 10
CLIENTS = 8
DESKTOP = (
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/124.0.0.0 Safari/537.36"
)
TEMPLATE = {
    "name": "Publish count",
    "type": "event",
    "apple_style": "eventTicket",
    "design": {
        "organization_name": "Acme Live",
        "description": "Concert ticket",
        "fields": [{"key": "seat", "label": "Seat", "slot": "primary", "default": "GA"}],
    },
}


def _call(stack: Stack, account: Account, method: str, path: str, **body: Any) -> dict[str, Any]:
    # One connection per request: the kernel spreads connections, not requests, over replicas.
    with stack.client(headers=account.headers()) as client:
        response = client.request(method, path, json=body)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def _work(stack: Stack) -> list[str]:
    """Create, update and view passes from concurrent clients; returns the pass ids."""
    account = stack.new_account()
    template = _call(stack, account, "POST", "/v1/templates", **TEMPLATE)

    def create(_: int) -> dict[str, Any]:
        return _call(stack, account, "POST", "/v1/passes", template_id=template["id"])

    def update(issued: dict[str, Any]) -> None:
        path = f"/v1/passes/{issued['id']}"
        _call(stack, account, "PATCH", path, field_values={"seat": "B2"})

    def view(issued: dict[str, Any]) -> None:
        httpx2.get(issued["url"], headers={"User-Agent": DESKTOP}, timeout=30.0).raise_for_status()

    with ThreadPoolExecutor(CLIENTS) as pool:
        passes = list(pool.map(create, range(PASSES)))
        list(pool.map(update, passes[:UPDATES]))
        list(pool.map(view, passes[-VIEWS:]))
    return [issued["id"] for issued in passes]


def _settled(stack: Stack, pass_ids: list[str]) -> dict[str, str] | None:
    """Every event of the passes by id, with its type, once all are recorded and none is left
    in an outbox (after which no relay can publish one of them again); None until then."""
    mongo: MongoClient[dict[str, Any]]
    with MongoClient(stack.mongo_url, serverSelectionTimeoutMS=5000) as mongo:
        db: Database[dict[str, Any]] = mongo[stack.database]
        recorded = {
            doc["_id"]: doc["type"]
            for doc in db["pass_events"].find({"pass_id": {"$in": pass_ids}}, {"type": 1})
        }
        kinds = Counter(recorded.values())
        if kinds != {"created": PASSES, "updated": UPDATES, "url_viewed": VIEWS}:
            return None
        ids = {"_id": {"$in": list(recorded)}}
        if any(db[name].count_documents(ids) for name in ("outbox", "api_outbox")):
            return None
    return recorded


async def test_each_event_is_published_once_with_two_replicas(stack: Stack) -> None:
    if len(stack.members("issuer")) < 2 or len(stack.members("api")) < 2:
        pytest.skip("needs two replicas of the issuer and the api (TESSERA_TEST_REPLICAS)")
    publishes: Counter[tuple[str, str]] = Counter()  # (events or live, Nats-Msg-Id)

    async def count(msg: Msg) -> None:
        publishes[msg.subject.split(".")[1], (msg.headers or {}).get("Nats-Msg-Id", "")] += 1

    client: Client = await nats.connect(stack.nats_url)
    try:
        for subject in ("tessera.events.>", "tessera.live.>"):
            await client.subscribe(subject, cb=count)
        await client.flush()
        pass_ids = await asyncio.to_thread(_work, stack)
        recorded = await asyncio.to_thread(
            poll, lambda: _settled(stack, pass_ids), timeout=60, message="every event relayed"
        )
        await client.flush()  # whatever was published before is delivered to `count` by now
    finally:
        await client.drain()
    on_events = {event_id: publishes["events", event_id] for event_id in recorded}
    assert set(on_events.values()) == {1}, Counter(on_events.values())
    updates = [event_id for event_id, kind in recorded.items() if kind == "updated"]
    assert [publishes["live", event_id] for event_id in updates] == [1] * UPDATES
