"""Rate-limit and quota units leased in blocks (services/api/leases.py) against the real store,
with several `RateLeases`/`QuotaLeases` standing for api replicas on one database: the shared
limit is never exceeded, a small limit is counted unit by unit, a large one costs a store write
per block rather than per request, and unused quota goes back to the counter."""

import asyncio
import secrets
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta

import pytest

from services.api.leases import QuotaLeases, RateLeases, block_size
from services.api.repository import ApiRepository
from shared.mongo import Origin, count_commands, create_client

EXPIRES = datetime.now(UTC) + timedelta(hours=1)


@pytest.fixture
async def repo(mongo_url: str) -> AsyncIterator[ApiRepository]:
    client = create_client(mongo_url)
    db = client[f"t_{secrets.token_hex(6)}"]
    repository = ApiRepository(db)
    await repository.ensure_indexes()
    try:
        yield repository
    finally:
        await client.drop_database(db.name)
        await client.close()


@pytest.fixture
def writes() -> Iterator[list[str]]:
    """The names of the MongoDB commands this process sends during the test."""
    sent: list[str] = []

    def count(command: str, origin: Origin) -> None:
        sent.append(command)

    count_commands(count)
    try:
        yield sent
    finally:
        count_commands(None)


def test_blocks_stay_a_small_share_of_what_is_left() -> None:
    assert block_size(8, limit=5, left=5, most=1024) == 1
    assert block_size(8, limit=1000, left=1000, most=1024) == 8
    assert block_size(64, limit=1000, left=1000, most=1024) == 31
    assert block_size(64, limit=1000, left=100, most=1024) == 3
    assert block_size(4096, limit=10**6, left=10**6, most=1024) == 1024


async def test_a_small_limit_is_shared_unit_by_unit(repo: ApiRepository) -> None:
    replicas = [RateLeases(repo), RateLeases(repo)]
    taken = [
        await replicas[index % 2].take("acct:test", "acct:test:1", 5, EXPIRES) for index in range(7)
    ]
    assert [take.admitted for take in taken] == [True] * 5 + [False] * 2
    assert [take.remaining for take in taken] == [4, 3, 2, 1, 0, 0, 0]


async def test_replicas_never_admit_more_than_the_limit_and_write_per_block(
    repo: ApiRepository, writes: list[str]
) -> None:
    replicas = [RateLeases(repo) for _ in range(3)]

    async def hammer(leases: RateLeases) -> int:
        admitted = 0
        for _ in range(800):
            admitted += (await leases.take("acct:test", "acct:test:2", 1000, EXPIRES)).admitted
        return admitted

    admitted = await asyncio.gather(*(hammer(leases) for leases in replicas))
    # Every replica asked until it was refused, so no leased unit was left unused.
    assert sum(admitted) == 1000
    assert await repo.window_count("acct:test:2") == 1000
    assert writes.count("findAndModify") < 1000 / 5


async def test_concurrent_requests_on_one_replica_stay_within_the_limit(
    repo: ApiRepository,
) -> None:
    leases = RateLeases(repo)
    taken = await asyncio.gather(
        *(leases.take("acct:test", "acct:test:3", 40, EXPIRES) for _ in range(100))
    )
    assert sum(take.admitted for take in taken) == 40


async def test_unused_quota_goes_back_when_a_replica_stops(repo: ApiRepository) -> None:
    first, second = QuotaLeases(repo), QuotaLeases(repo)
    counter = "acct:test:2026-01"
    for _ in range(30):
        assert await first.reserve(counter, "2026-01", 1000, EXPIRES)
    assert await repo.usage(counter) > 30  # its last block is not used up
    await first.give_back()
    assert await repo.usage(counter) == 30
    reserved = [await second.reserve(counter, "2026-01", 1000, EXPIRES) for _ in range(1000)]
    assert reserved.count(True) == 970
    assert await repo.usage(counter) == 1000


async def test_a_refused_unit_is_used_again_and_a_new_month_gives_the_old_back(
    repo: ApiRepository,
) -> None:
    quota = QuotaLeases(repo)
    january, february = "acct:test:2026-01", "acct:test:2026-02"
    for _ in range(20):
        assert await quota.reserve(january, "2026-01", 10**6, EXPIRES)
    quota.release(january, "2026-01")  # the 20th request was refused: its unit is kept here
    assert await quota.reserve(february, "2026-02", 10**6, EXPIRES)
    assert await repo.usage(january) == 19
    assert await repo.usage(february) == 1


async def test_a_plan_change_hands_out_no_unit_leased_under_the_old_limit(
    repo: ApiRepository,
) -> None:
    """A downgrade: the units a replica leased under the larger quota go back, and the next
    reservation is counted against the new one."""
    quota = QuotaLeases(repo)
    counter = "acct:test:2026-03"
    for _ in range(20):
        assert await quota.reserve(counter, "2026-03", 100_000, EXPIRES)
    assert await repo.usage(counter) > 20  # a block of more than 20 units was leased
    assert not await quota.reserve(counter, "2026-03", 10, EXPIRES)
    assert await repo.usage(counter) == 20
    rate = RateLeases(repo)
    for _ in range(20):
        assert (await rate.take("acct:test", "acct:test:4", 100_000, EXPIRES)).admitted
    assert not (await rate.take("acct:test", "acct:test:4", 10, EXPIRES)).admitted


async def test_concurrent_first_reservations_of_a_new_month_fail_none_and_lose_no_unit(
    repo: ApiRepository,
) -> None:
    quota = QuotaLeases(repo)
    old = [f"acct:{n}:2026-04" for n in range(2)]
    for counter in old:
        for _ in range(5):
            assert await quota.reserve(counter, "2026-04", 10**6, EXPIRES)
    new = [f"acct:{n}:2026-05" for n in range(2)] * 3
    reserved = await asyncio.gather(*(quota.reserve(c, "2026-05", 10**6, EXPIRES) for c in new))
    assert all(reserved)
    await quota.give_back()
    assert [await repo.usage(counter) for counter in old] == [5, 5]
    assert [await repo.usage(counter) for counter in new[:2]] == [3, 3]
