"""The serial listing of Apple's web service on a real MongoDB, for a device with 2,000 passes
(issue 15): its update tag stays under 100 bytes, and "passes updated since" still lists every
changed pass and only those, because the long tag it stands for is kept by the service."""

import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest

from services.events.events_out import events_outbox
from services.events.registrations import AppleWebService
from services.events.repository import KEPT_TAGS, Registrations, device_hash, registration_id
from services.events.update_tags import INLINE_MAX_LENGTH
from services.issuer.reads import IssuerReads
from shared.clock import SystemClock
from shared.mongo import Database, create_client
from tests.support.records import pass_record

PASS_TYPE = "pass.dev.tessera"
PASSES = 2000


@dataclass
class Device:
    db: Database
    wallet: AppleWebService
    identifier: str
    serials: list[str]

    async def listing(self, tag: str | None) -> tuple[list[str], str] | None:
        found = await self.wallet.updated_serials(self.identifier, PASS_TYPE, tag)
        return None if found is None else (found.serial_numbers, found.last_updated)

    async def update(self, *serials: str) -> None:
        await self.db["passes"].update_many(
            {"serial_number": {"$in": list(serials)}}, {"$inc": {"version": 1}}
        )

    async def add(self, count: int) -> list[str]:
        """`count` more passes, registered on this device as registrations.py stores them."""
        now = datetime.now(UTC)
        suffixes = [secrets.token_hex(8) for _ in range(count)]
        records = [
            pass_record(_id=f"pass_{s}", short_id=s, serial_number=f"serial-{s}") for s in suffixes
        ]
        await self.db["passes"].insert_many([record.to_document() for record in records])
        await self.db["registrations"].insert_many(
            {
                "_id": registration_id(self.identifier, PASS_TYPE, record.serial_number),
                "device": device_hash(self.identifier),
                "pass_type": PASS_TYPE,
                "serial_number": record.serial_number,
                "pass_id": record.id,
                "account_id": record.account_id,
                "mode": record.mode,
                "push_token": "a" * 64,
                "slot": 0,
                "created_at": now,
                "updated_at": now,
            }
            for record in records
        )
        serials = [record.serial_number for record in records]
        self.serials += serials
        return serials


@pytest.fixture
async def device(mongo_url: str) -> AsyncIterator[Device]:
    client = create_client(mongo_url)
    db = client[f"t_{secrets.token_hex(6)}"]
    outbox = events_outbox(db)
    registrations = Registrations(db, outbox)
    await registrations.ensure_indexes()
    wallet = AppleWebService(registrations, IssuerReads(db), outbox, SystemClock())
    try:
        yield Device(db, wallet, secrets.token_hex(16), [])
    finally:
        await client.drop_database(db.name)
        await client.close()


@pytest.mark.slow  # each listing reads 2,000 passes: seconds on the embedded store
# About 25 s alone, setup and teardown (2,000 passes dropped) included; beside the suite's other
# worker on two CPUs it once took more than the default 120 s.
@pytest.mark.timeout(360)
async def test_a_device_with_2000_passes_gets_a_short_tag_that_misses_nothing(
    device: Device,
) -> None:
    await device.add(PASSES)
    listed = await device.listing(None)
    assert listed is not None
    everything, tag = listed
    assert sorted(everything) == sorted(device.serials)
    assert len(tag) < 100  # was about 32 KB: 16 bytes a pass
    assert await device.listing(tag) is None  # 204: nothing changed

    changed = device.serials[7], device.serials[1234], device.serials[-1]
    await device.update(*changed)
    listed = await device.listing(tag)
    assert listed is not None
    assert sorted(listed[0]) == sorted(changed)
    newer = listed[1]
    assert newer != tag
    assert len(newer) < 100

    # A pass added after a tag is listed with it: the device may hold an older copy of it.
    (added,) = await device.add(1)
    await device.update(device.serials[0])
    listed = await device.listing(newer)
    assert listed is not None
    assert sorted(listed[0]) == sorted([added, device.serials[0]])
    # The earlier tag still stands for what it did (a device whose answer was lost).
    listed = await device.listing(tag)
    assert listed is not None
    assert sorted(listed[0]) == sorted({*changed, added, device.serials[0]})


async def test_a_tag_the_service_no_longer_keeps_lists_every_pass(device: Device) -> None:
    count = 10  # enough for a tag longer than INLINE_MAX_LENGTH, so it is kept
    await device.add(count)
    listed = await device.listing(None)
    assert listed is not None
    first = listed[1]
    tags = [first]
    for serial in device.serials[:KEPT_TAGS]:
        await device.update(serial)
        listed = await device.listing(tags[-1])
        assert listed is not None
        assert listed[0] == [serial]
        tags.append(listed[1])
    assert all(tag.startswith("v2.") for tag in tags)
    (kept,) = await device.db["update_tags"].find().to_list()
    assert [entry["id"] for entry in kept["tags"]] == [t.removeprefix("v2.") for t in tags[1:]]
    # The first tag was pushed out: everything is listed, as without a tag. Never a miss.
    listed = await device.listing(first)
    assert listed is not None
    assert len(listed[0]) == count
    listed = await device.listing("v2.AAAAAAAAAAAAAAAAAAAAAA")
    assert listed is not None
    assert len(listed[0]) == count
    # The same versions again keep their tag, and store nothing more.
    assert await device.listing(tags[-1]) is None
    again = await device.listing(None)
    assert again is not None
    assert again[1] == tags[-1]
    (kept,) = await device.db["update_tags"].find().to_list()
    assert len(kept["tags"]) == KEPT_TAGS


async def test_a_few_passes_get_the_tag_itself_and_nothing_is_stored(device: Device) -> None:
    await device.add(4)
    listed = await device.listing(None)
    assert listed is not None
    tag = listed[1]
    assert tag.startswith("v1.")
    assert len(tag) <= INLINE_MAX_LENGTH
    await device.update(device.serials[2])
    listed = await device.listing(tag)
    assert listed is not None
    assert listed[0] == [device.serials[2]]
    assert listed[1].startswith("v1.")
    assert listed[1] != tag
    assert await device.db["update_tags"].count_documents({}) == 0
