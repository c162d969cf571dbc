"""FreshPayloads (services/webhooks/fresh_payloads.py): the bodies asked for while a read is
under way go together in the next read; a failed read fails only those it was for."""

import asyncio
from collections.abc import Collection

import pytest

from services.webhooks.fresh_payloads import FreshPayloads


async def test_bodies_asked_for_during_a_read_share_the_next_one() -> None:
    reads: list[set[str]] = []
    first_read_started, finish_first = asyncio.Event(), asyncio.Event()

    async def read(ids: Collection[str]) -> dict[str, str]:
        reads.append(set(ids))
        if len(reads) == 1:
            first_read_started.set()
            await finish_first.wait()
        return {
            delivery_id: f"body of {delivery_id}" for delivery_id in ids if delivery_id != "gone"
        }

    fresh = FreshPayloads(read)
    first = asyncio.create_task(fresh.get("d1"))
    await first_read_started.wait()
    later = [asyncio.create_task(fresh.get(name)) for name in ("d2", "d3", "gone")]
    await asyncio.sleep(0)
    finish_first.set()
    assert await first == "body of d1"
    assert await asyncio.gather(*later) == ["body of d2", "body of d3", None]
    assert reads == [{"d1"}, {"d2", "d3", "gone"}]


async def test_a_failed_read_fails_its_own_and_the_next_read_goes_on() -> None:
    calls = 0

    async def read(ids: Collection[str]) -> dict[str, str]:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise ConnectionError("store unreachable")
        return dict.fromkeys(ids, "body")

    fresh = FreshPayloads(read)
    with pytest.raises(ConnectionError):
        await fresh.get("d1")
    assert await fresh.get("d2") == "body"
