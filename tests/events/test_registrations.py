"""The Apple web service's logic on a real MongoDB: who is authenticated, push tokens that
follow the device, a registration and its event committed together (in the events service's
outbox) or not at all, dropping dead tokens, bodies no service could store, the cap on devices
per pass (exact under concurrency) and the rate limits."""

import asyncio
import json
import logging
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import pytest
from pymongo.errors import DuplicateKeyError

from services.events.events_out import events_outbox
from services.events.rate_limits import WalletLimits, WalletRateLimiter
from services.events.registrations import AppleWebService
from services.events.repository import Registrations, WalletRateWindows
from services.issuer.reads import IssuerReads
from shared.clock import SystemClock
from shared.messages import PassEventMessage, pass_event_adapter
from shared.models import PassRecord
from shared.mongo import Database, create_client
from shared.outbox import Outbox
from shared.pass_events import pass_event
from tests.support.records import pass_record

PASS_TYPE = "pass.dev.tessera"
TOKEN = "t" * 32
CAP = 4


@dataclass
class World:
    db: Database
    wallet: AppleWebService
    registrations: Registrations
    outbox: Outbox

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
        return await self.register_body(record, device, body)

    async def register_body(self, record: PassRecord, device: str, body: bytes) -> int:
        return await self.wallet.register(
            device, PASS_TYPE, record.serial_number, f"ApplePass {TOKEN}", body
        )

    async def events(self) -> list[PassEventMessage]:
        """What the events service committed to its outbox, for its relay to publish."""
        documents = await self.outbox.documents.find().sort("_id").to_list()
        return [pass_event_adapter.validate_json(doc["payload"]) for doc in documents]

    async def installed(self, record: PassRecord) -> int:
        return sum(
            event.pass_id == record.id and event.event_type == "installed"
            for event in await self.events()
        )


@pytest.fixture
async def world(mongo_url: str) -> AsyncIterator[World]:
    client = create_client(mongo_url)
    db = client[f"t_{secrets.token_hex(6)}"]
    outbox = events_outbox(db)
    registrations = Registrations(db, outbox)
    await registrations.ensure_indexes()
    clock = SystemClock()
    wallet = AppleWebService(registrations, IssuerReads(db), outbox, clock, max_devices=CAP)
    try:
        yield World(db, wallet, registrations, outbox)
    finally:
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


async def test_a_voided_pass_registers_as_apple_documents(world: World) -> None:
    """Issue 15: it was a 410, which Apple's reference does not list for this call (200, 201,
    401) and which makes Wallet retry. The device is registered, so the serial listing gives
    it the voided version if it holds an older one."""
    record = await world.add_pass(voided=True)
    device = secrets.token_hex(16)
    assert await world.register(record, device, "e" * 64) == 201
    assert await world.register(record, device, "e" * 64) == 200
    assert await world.registrations.push_tokens(record.id) == ["e" * 64]
    assert await world.installed(record) == 1
    listed = await world.wallet.updated_serials(device, PASS_TYPE, None)
    assert listed is not None
    assert listed.serial_numbers == [record.serial_number]


async def test_a_device_has_one_push_token_per_pass_type(world: World) -> None:
    first, second = await world.add_pass(), await world.add_pass()
    device = secrets.token_hex(16)
    assert await world.register(first, device, "a" * 64) == 201
    assert await world.register(second, device, "a" * 64) == 201
    assert await world.register(first, device, "b" * 64) == 200
    reads = world.registrations
    assert await reads.push_tokens(first.id) == ["b" * 64]
    assert await reads.push_tokens(second.id) == ["b" * 64]


async def test_a_registration_and_its_event_commit_together_or_not_at_all(world: World) -> None:
    """No undo and no window: the registration and its event are one transaction. Here the
    event's write fails (a unique index the test adds refuses it), and the registration is
    not stored either; an unregistration whose event fails keeps the registration."""
    record = await world.add_pass()
    clock = StoppedClock()
    wallet = AppleWebService(world.registrations, IssuerReads(world.db), world.outbox, clock)
    device, body = secrets.token_hex(16), json.dumps({"pushToken": "c" * 64}).encode()
    header = f"ApplePass {TOKEN}"
    unregister = partial(wallet.unregister, device, PASS_TYPE, record.serial_number, header)
    async with _refused_at(world, clock.moment):
        with pytest.raises(DuplicateKeyError):
            await wallet.register(device, PASS_TYPE, record.serial_number, header, body)
    assert await world.registrations.push_tokens(record.id) == []
    assert await world.events() == []
    # The device retries, and now the registration and its event both happen.
    assert await wallet.register(device, PASS_TYPE, record.serial_number, header, body) == 201
    (installed,) = await world.events()
    assert (installed.event_type, installed.pass_id) == ("installed", record.id)
    clock.moment += timedelta(seconds=1)
    async with _refused_at(world, clock.moment):
        with pytest.raises(DuplicateKeyError):
            await unregister()
    assert await world.registrations.push_tokens(record.id) == ["c" * 64]
    assert await unregister() == 200
    assert await world.registrations.push_tokens(record.id) == []
    assert [event.event_type for event in await world.events()] == ["installed", "removed"]
    assert await unregister() == 200  # not registered any more: no second event
    assert len(await world.events()) == 2


@asynccontextmanager
async def _refused_at(world: World, moment: datetime) -> AsyncIterator[None]:
    """While open, the events outbox refuses a document created at `moment`: a unique index
    on `created_at` and a document holding that value (BSON dates count milliseconds)."""
    documents = world.outbox.documents
    index = await documents.create_index("created_at", unique=True)
    await documents.insert_one({"_id": "blocker", "created_at": moment})
    try:
        yield
    finally:
        await documents.delete_one({"_id": "blocker"})
        await documents.drop_index(index)


async def test_a_dead_token_is_dropped_unless_the_device_registered_again_since(
    world: World,
) -> None:
    record = await world.add_pass()
    device = secrets.token_hex(16)
    assert await world.register(record, device, "d" * 64) == 201
    before = datetime.now(UTC) - timedelta(minutes=5)
    drop = world.wallet.drop_push_token
    assert await drop(PASS_TYPE, "d" * 64, before, "push_token_inactive") == 0
    assert await drop("pass.other", "d" * 64, None, "push_token_inactive") == 0
    assert await drop(PASS_TYPE, "d" * 64, None, "push_token_invalid") == 1
    assert await world.registrations.push_tokens(record.id) == []
    (removed,) = [event for event in await world.events() if event.event_type == "removed"]
    assert removed.metadata["reason"] == "push_token_invalid"


def _nested(depth: int) -> bytes:
    return b'{"pushToken": ' + b"[" * depth + b'"' + b"a" * 64 + b'"' + b"]" * depth + b"}"


@pytest.mark.parametrize(
    "body",
    [
        _nested(5_000),  # RecursionError before issue 10 F07
        _nested(40),
        b'{"pushToken": "\\ud800aaaaaaaaaaaa"}',
        b'{"pushToken": "' + b"a" * 64 + b'\\n"}',  # a trailing newline: F12
        b'{"pushToken": "' + b"a" * 64 + b'", "n": 1e999}',
        b'{"pushToken": "' + b"a" * 64 + b'", "\\u0000": 1}',
        b"\xff",
    ],
    ids=["deep", "nested", "surrogate", "newline", "infinite", "nul key", "not utf-8"],
)
async def test_a_body_no_service_could_store_is_400_with_one_log_line(
    world: World, body: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    record = await world.add_pass()
    with caplog.at_level(logging.INFO, logger="services.events.registrations"):
        assert await world.register_body(record, secrets.token_hex(16), body) == 400
    (line,) = caplog.records
    assert line.getMessage().startswith("refused a registration body")
    assert line.exc_info is None
    assert await world.registrations.push_tokens(record.id) == []


async def test_a_push_token_must_match_entirely() -> None:
    from services.events.registrations import _push_token

    assert _push_token(b'{"pushToken": "abcdEF12"}') == "abcdEF12"
    for token in ("abcdEF12\n", "abcdEF1", "abcd EF12", "abcdEF12\u0000", "a" * 513):
        assert _push_token(json.dumps({"pushToken": token}).encode()) is None, token


async def test_a_pass_takes_at_most_its_cap_of_devices(world: World) -> None:
    record = await world.add_pass()
    devices = [secrets.token_hex(16) for _ in range(CAP + 1)]
    for device in devices[:CAP]:
        assert await world.register(record, device, secrets.token_hex(32)) == 201
    # One more is refused and records nothing; a registered device still renews.
    assert await world.register(record, devices[CAP], "e" * 64) == 403
    assert await world.register(record, devices[0], "f" * 64) == 200
    registrations = world.registrations
    assert (
        await registrations.register(_document(record, devices[CAP]), CAP, _event(record)) == "full"
    )
    assert await world.installed(record) == CAP
    assert len(await world.registrations.push_tokens(record.id)) == CAP
    assert "e" * 64 not in await world.registrations.push_tokens(record.id)
    # Another pass has its own devices; a device that leaves frees its place.
    assert await world.register(await world.add_pass(), devices[CAP], "e" * 64) == 201
    header = f"ApplePass {TOKEN}"
    assert await world.wallet.unregister(devices[1], PASS_TYPE, record.serial_number, header) == 200
    assert await world.register(record, devices[CAP], "e" * 64) == 201
    assert await world.installed(record) == CAP + 1


async def test_the_cap_holds_under_concurrent_registrations(world: World) -> None:
    record = await world.add_pass()
    devices = [secrets.token_hex(16) for _ in range(30)]
    statuses = await asyncio.gather(
        *(world.register(record, device, secrets.token_hex(32)) for device in devices),
        # The same device twice at once is one registration.
        *(world.register(record, devices[0], "a" * 64) for _ in range(3)),
    )
    assert statuses.count(201) == CAP
    assert set(statuses) <= {200, 201, 403}
    stored = await world.db["registrations"].find({"pass_id": record.id}).to_list()
    assert len(stored) == CAP
    assert sorted(doc["slot"] for doc in stored) == list(range(CAP))
    assert await world.installed(record) == CAP


async def test_registrations_past_a_lowered_cap_count_against_it(world: World) -> None:
    record = await world.add_pass()
    higher = [  # made while the cap was higher
        _document(record, secrets.token_hex(16)) | {"slot": CAP + n} for n in range(3)
    ]
    for document in higher:
        await world.db["registrations"].insert_one(document)
    statuses = await asyncio.gather(
        *(world.register(record, secrets.token_hex(16), "b" * 64) for _ in range(10))
    )
    assert statuses.count(201) == CAP - 3
    assert await world.db["registrations"].count_documents({"pass_id": record.id}) == CAP
    # The older ones still renew.
    assert await world.registrations.register(higher[0], CAP, _event(record)) == "renewed"


def _event(record: PassRecord) -> PassEventMessage:
    return pass_event(record, "installed", {}, datetime.now(UTC))


def _document(record: PassRecord, device: str) -> dict[str, Any]:
    from services.events.repository import device_hash, registration_id

    now = datetime.now(UTC)
    return {
        "_id": registration_id(device, PASS_TYPE, record.serial_number),
        "device": device_hash(device),
        "pass_type": PASS_TYPE,
        "serial_number": record.serial_number,
        "pass_id": record.id,
        "account_id": record.account_id,
        "mode": record.mode,
        "push_token": "c" * 64,
        "created_at": now,
        "updated_at": now,
    }


@dataclass
class StoppedClock:
    moment: datetime = field(default_factory=lambda: datetime(2031, 1, 1, 12, 0, 10, tzinfo=UTC))

    def now(self) -> datetime:
        return self.moment


async def test_requests_past_a_limit_wait_for_the_next_window(world: World) -> None:
    windows = WalletRateWindows(world.db)
    await windows.ensure_indexes()
    clock = StoppedClock()
    limiter = WalletRateLimiter(windows, WalletLimits(60, per_pass=3, per_address=5), clock)
    pass_key = (PASS_TYPE, "serial-1")
    assert [await limiter.retry_after("192.0.2.1", pass_key) for _ in range(4)] == [0, 0, 0, 50]
    # The pass's limit is spent, from any address. The address counted all four requests (a
    # request refused by one limit still counts against the other): one is left.
    assert await limiter.retry_after("192.0.2.2", pass_key) == 50
    assert await limiter.retry_after("192.0.2.1", (PASS_TYPE, "serial-2")) == 0
    assert await limiter.retry_after("192.0.2.1", None) == 50
    assert await limiter.retry_after("2001:db8::1", None) == 0
    clock.moment += timedelta(seconds=50)  # the next window
    assert await limiter.retry_after("192.0.2.1", pass_key) == 0


async def test_the_limits_hold_under_concurrent_requests(world: World) -> None:
    windows = WalletRateWindows(world.db)
    limiter = WalletRateLimiter(windows, WalletLimits(3600, 0, per_address=7), StoppedClock())
    answers = await asyncio.gather(*(limiter.retry_after("192.0.2.9", None) for _ in range(25)))
    assert answers.count(0) == 7


async def test_a_limit_of_zero_is_no_limit(world: World) -> None:
    limiter = WalletRateLimiter(WalletRateWindows(world.db), WalletLimits(60, 0, 0), SystemClock())
    for _ in range(3):
        assert await limiter.retry_after("192.0.2.3", (PASS_TYPE, "s")) == 0
    assert await world.db["wallet_rate_windows"].count_documents({}) == 0
