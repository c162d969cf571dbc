"""Live-update pushes on a real MongoDB, NATS and the fake APNs: counts per answer, a 410 (or a
400 saying the token is invalid) drops the token's registrations through the events service's
command, and the held event is released with the counts. Nothing here raises, whatever APNs or
the events service do."""

import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from faststream.nats import NatsBroker
from prometheus_client import REGISTRY

from services.events.events_out import EventPublisher
from services.events.handlers import register_wallet_commands
from services.events.registrations import AppleWebService
from services.events.repository import RegistrationReads, Registrations
from services.issuer.apns import ApnsClient, tls_context
from services.issuer.push import LiveUpdates, PushReport
from services.issuer.repository import IssuerReads, IssuerRepository
from services.issuer.signing import ensure_dev_identity
from shared.clock import SystemClock
from shared.ids import new_id
from shared.messages import PassEventMessage, pass_event_adapter
from shared.mongo import Database, create_client
from shared.nats import create_broker
from tests.support.fake_apns import FakeApns, running_fake_apns
from tests.support.records import pass_record

PASS_TYPE = "pass.dev.tessera"


@dataclass
class Setup:
    db: Database
    repo: IssuerRepository
    live: LiveUpdates
    fake: FakeApns
    notified: list[bool]

    async def register(self, pass_id: str, push_token: str) -> None:
        now = datetime.now(UTC)
        registered = await Registrations(self.db).register(
            {
                "_id": secrets.token_hex(8),
                "device": secrets.token_hex(32),
                "pass_type": PASS_TYPE,
                "serial_number": "s",
                "pass_id": pass_id,
                "account_id": "acct_x",
                "mode": "test",
                "push_token": push_token,
                "created_at": now - timedelta(minutes=1),
                "updated_at": now - timedelta(minutes=1),
            },
            max_per_pass=100,
        )
        assert registered == "created"


async def _events_service(nats_url: str, db: Database) -> NatsBroker:
    broker = create_broker(nats_url)
    clock = SystemClock()
    wallet = AppleWebService(
        Registrations(db), IssuerReads(db), EventPublisher(broker, clock), clock
    )
    register_wallet_commands(broker, wallet)
    await broker.start()
    return broker


@pytest.fixture
async def setup(mongo_url: str, nats_url: str, tmp_path: Path) -> AsyncIterator[Setup]:
    identity = ensure_dev_identity(tmp_path / "signing")
    client = create_client(mongo_url)
    db = client[f"t_{secrets.token_hex(6)}"]
    repo = IssuerRepository(client, db)
    broker = create_broker(nats_url)
    await broker.connect()
    notified: list[bool] = []
    with running_fake_apns(tmp_path / "signing" / "root-ca.pem", tmp_path) as fake:
        tls = tls_context(identity, fake.server_ca_path)
        apns = ApnsClient(fake.url, PASS_TYPE, tls, None, timeout_seconds=5)
        live = LiveUpdates(
            repo, RegistrationReads(db), apns, broker, lambda: notified.append(True), 2.0
        )
        try:
            yield Setup(db, repo, live, fake, notified)
        finally:
            await apns.aclose()
            await broker.stop()
            await client.drop_database(db.name)
            await client.close()


async def test_every_registered_device_is_pushed_and_each_answer_counted(
    setup: Setup, nats_url: str
) -> None:
    events = await _events_service(nats_url, setup.db)
    pass_id = new_id("pass")
    fine, gone, broken = "a" * 64, "b" * 64, "c" * 64
    for token in (fine, gone, broken):
        await setup.register(pass_id, token)
    await setup.register(new_id("pass"), "d" * 64)  # another pass's device is not pushed
    setup.fake.answer(gone, 410, "Unregistered")
    setup.fake.answer(broken, 500, "InternalServerError")
    before = _pushes_by_result()
    try:
        report = await setup.live.push_pass(pass_id)
    finally:
        await events.stop()
    assert report == PushReport(pushed=1, failures=2, unregistered=1)
    after = _pushes_by_result()
    assert {result: after[result] - before[result] for result in after} == {
        "success": 1,
        "unregistered": 1,
        "rejected": 1,
        "error": 0,
    }
    assert {push.token for push in setup.fake.pushes()} == {fine, gone, broken}
    assert await RegistrationReads(setup.db).push_tokens(pass_id) == [fine, broken]


async def test_tokens_apns_calls_invalid_are_dropped_like_dead_ones(
    setup: Setup, nats_url: str
) -> None:
    """Issue 10 F05: a fake device's made-up token answers 400 BadDeviceToken (or, from another
    pass type, DeviceTokenNotForTopic); its registrations go, other 400s keep theirs."""
    events = await _events_service(nats_url, setup.db)
    pass_id = new_id("pass")
    made_up, foreign, throttled = "1" * 64, "2" * 64, "3" * 64
    for token in (made_up, foreign, throttled):
        await setup.register(pass_id, token)
    setup.fake.answer(made_up, 400, "BadDeviceToken")
    setup.fake.answer(foreign, 400, "DeviceTokenNotForTopic")
    setup.fake.answer(throttled, 400, "BadPriority")
    before = _pushes_by_result()
    try:
        report = await setup.live.push_pass(pass_id)
    finally:
        await events.stop()
    assert report == PushReport(pushed=0, failures=3, unregistered=2)
    after = _pushes_by_result()
    assert after["unregistered"] - before["unregistered"] == 2
    assert after["rejected"] - before["rejected"] == 1
    assert await RegistrationReads(setup.db).push_tokens(pass_id) == [throttled]


def _pushes_by_result() -> dict[str, float]:
    return {
        result: REGISTRY.get_sample_value("tessera_apns_pushes_total", {"result": result}) or 0.0
        for result in ("success", "unregistered", "rejected", "error")
    }


async def test_a_410_without_an_events_service_still_reports(setup: Setup) -> None:
    pass_id = new_id("pass")
    await setup.register(pass_id, "e" * 64)
    setup.fake.answer("e" * 64, 410, "Unregistered")
    report = await setup.live.push_pass(pass_id)
    assert report == PushReport(pushed=0, failures=1, unregistered=1)
    # Nobody removed it: the next push's 410 will ask again.
    assert await RegistrationReads(setup.db).push_tokens(pass_id) == ["e" * 64]


async def test_the_held_event_is_released_with_the_counts(setup: Setup) -> None:
    record = pass_record(_id=new_id("pass"))
    await setup.register(record.id, "f" * 64)
    event = PassEventMessage(
        id=new_id("pass_event"),
        account_id=record.account_id,
        mode=record.mode,
        pass_id=record.id,
        event_type="updated",
        metadata={"stage": "pushed", "field_values": ["seat"], "metadata": []},
        created_at=record.updated_at,
        pass_snapshot=record.snapshot(),
    )
    now = datetime.now(UTC)
    async with setup.repo.unit_of_work() as uow:
        payload = event.model_dump_json().encode()
        await uow.add_outbox(event.id, event.subject, payload, now, now + timedelta(minutes=1))
    assert await setup.repo.outbox_batch(now) == []
    setup.live.schedule(event)
    await setup.live.stop()
    (released,) = await setup.repo.outbox_batch(now)
    assert pass_event_adapter.validate_json(released["payload"]).metadata == {
        "stage": "pushed",
        "field_values": ["seat"],
        "metadata": [],
        "devices_pushed": 1,
        "push_failures": 0,
        "devices_unregistered": 0,
    }
    assert setup.notified == [True]
