"""The Apple web service's logic on a real MongoDB and NATS: who is authenticated, push tokens
that follow the device, undoing a registration whose event cannot be published, dropping dead
tokens, and the Last-Modified of files stored before it was kept."""

import io
import json
import secrets
import zipfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from services.events.events_out import EventPublisher
from services.events.registrations import AppleWebService
from services.events.repository import RegistrationReads, Registrations
from services.issuer.repository import IssuerReads
from shared.clock import SystemClock
from shared.messages import DropPushToken
from shared.models import PassRecord
from shared.mongo import Database, create_client
from shared.nats import create_broker, ensure_events_stream
from tests.support.records import pass_record

PASS_TYPE = "pass.dev.tessera"
TOKEN = "t" * 32


@dataclass
class World:
    db: Database
    wallet: AppleWebService
    registrations: Registrations
    nats_url: str

    async def add_pass(self, **overrides: object) -> PassRecord:
        suffix = secrets.token_hex(4)
        record = pass_record(
            _id=f"pass_{suffix}", serial_number=f"serial-{suffix}", authentication_token=TOKEN
        ).model_copy(update=overrides)
        await self.db["passes"].insert_one(record.to_document())
        stamp = datetime(2030, 1, 1, 12, 0, 0, tzinfo=UTC)
        await self.db["pass_files"].insert_one(
            {
                "_id": record.id,
                "version": record.version,
                "data": b"PK-pass",
                "pass_type_identifier": PASS_TYPE,
                "last_modified": stamp,
                "created_at": stamp,
            }
        )
        return record

    async def register(self, record: PassRecord, device: str, push_token: str) -> int:
        body = json.dumps({"pushToken": push_token}).encode()
        return await self.wallet.register(
            device, PASS_TYPE, record.serial_number, f"ApplePass {TOKEN}", body
        )


@pytest.fixture
async def world(mongo_url: str, nats_url: str) -> AsyncIterator[World]:
    client = create_client(mongo_url)
    db = client[f"t_{secrets.token_hex(6)}"]
    broker = create_broker(nats_url)
    await broker.connect()
    await ensure_events_stream(broker)
    registrations = Registrations(db)
    await registrations.ensure_indexes()
    clock = SystemClock()
    wallet = AppleWebService(registrations, IssuerReads(db), EventPublisher(broker, clock), clock)
    try:
        yield World(db, wallet, registrations, nats_url)
    finally:
        await broker.stop()
        await client.drop_database(db.name)
        await client.close()


async def test_only_the_right_token_for_the_right_pass_type_authenticates(world: World) -> None:
    record = await world.add_pass()
    serial = record.serial_number
    assert await world.wallet.authenticate(PASS_TYPE, serial, f"ApplePass {TOKEN}") is not None
    assert await world.wallet.authenticate(PASS_TYPE, serial, f"applepass {TOKEN}") is not None
    for pass_type, serial_number, header in (
        (PASS_TYPE, serial, f"ApplePass {TOKEN}x"),
        (PASS_TYPE, serial, f"Bearer {TOKEN}"),
        (PASS_TYPE, serial, "ApplePass "),
        (PASS_TYPE, serial, None),
        (PASS_TYPE, "unknown", f"ApplePass {TOKEN}"),
        ("pass.other", serial, f"ApplePass {TOKEN}"),
    ):
        assert await world.wallet.authenticate(pass_type, serial_number, header) is None


async def test_a_file_stored_without_its_pass_type_is_read_from_its_pass_json(
    world: World,
) -> None:
    record = await world.add_pass()
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as bundle:
        bundle.writestr("pass.json", json.dumps({"passTypeIdentifier": "pass.legacy"}))
    stamp = datetime(2030, 1, 1, 12, 0, 0, 250_000, tzinfo=UTC)
    await world.db["pass_files"].replace_one(
        {"_id": record.id},
        {"_id": record.id, "version": 2, "data": archive.getvalue(), "created_at": stamp},
    )
    header = f"ApplePass {TOKEN}"
    assert await world.wallet.authenticate(PASS_TYPE, record.serial_number, header) is None
    latest = await world.wallet.latest_pass("pass.legacy", record.serial_number, header, None)
    assert latest.status == 200
    # Without a stored Last-Modified, the file's time rounded up to the second stands in.
    assert latest.last_modified == stamp.replace(second=1, microsecond=0)
    assert latest.delivered is not None
    assert latest.version == 2


async def test_a_device_has_one_push_token_per_pass_type(world: World) -> None:
    first, second = await world.add_pass(), await world.add_pass()
    device = secrets.token_hex(16)
    assert await world.register(first, device, "a" * 64) == 201
    assert await world.register(second, device, "a" * 64) == 201
    assert await world.register(first, device, "b" * 64) == 200
    reads = RegistrationReads(world.db)
    assert await reads.push_tokens(first.id) == ["b" * 64]
    assert await reads.push_tokens(second.id) == ["b" * 64]


async def test_a_registration_whose_event_cannot_be_published_is_undone(world: World) -> None:
    record = await world.add_pass()
    unreachable = create_broker("nats://127.0.0.1:9")  # never connected: every publish fails
    clock = SystemClock()
    failing = AppleWebService(
        world.registrations, IssuerReads(world.db), EventPublisher(unreachable, clock), clock
    )
    device, body = secrets.token_hex(16), json.dumps({"pushToken": "c" * 64}).encode()
    header = f"ApplePass {TOKEN}"
    assert await failing.register(device, PASS_TYPE, record.serial_number, header, body) == 503
    assert await RegistrationReads(world.db).push_tokens(record.id) == []
    # The device retries, and now the registration and its event both happen.
    assert await world.register(record, device, "c" * 64) == 201
    assert await world.wallet.unregister(device, PASS_TYPE, record.serial_number, header) == 200
    assert await failing.register(device, PASS_TYPE, record.serial_number, header, body) == 503
    assert await world.register(record, device, "c" * 64) == 201
    assert await failing.unregister(device, PASS_TYPE, record.serial_number, header) == 503
    assert await RegistrationReads(world.db).push_tokens(record.id) == ["c" * 64]


async def test_a_dead_token_is_dropped_unless_the_device_registered_again_since(
    world: World,
) -> None:
    record = await world.add_pass()
    device = secrets.token_hex(16)
    assert await world.register(record, device, "d" * 64) == 201
    before = datetime.now(UTC) - timedelta(minutes=5)
    command = DropPushToken(command_id="cmd_x", pass_type_identifier=PASS_TYPE, push_token="d" * 64)
    stale = command.model_copy(update={"inactive_since": before})
    assert await world.wallet.drop_push_token(stale) == {"dropped": 0}
    other_type = command.model_copy(update={"pass_type_identifier": "pass.other"})
    assert await world.wallet.drop_push_token(other_type) == {"dropped": 0}
    assert await world.wallet.drop_push_token(command) == {"dropped": 1}
    assert await RegistrationReads(world.db).push_tokens(record.id) == []
