"""Device logs are bounded: entries per request, characters per entry, entries per day."""

import asyncio
import json
import logging
import secrets
from datetime import UTC, datetime, timedelta

import pytest

from services.events import repository
from services.events.device_logs import MAX_ENTRIES, MAX_MESSAGE_CHARS, parse_logs
from services.events.reads import DeviceLogReads
from services.events.repository import DeviceLogs
from shared.mongo import Database, create_client
from shared.pagination import PageRequest


def test_a_log_body_is_a_list_of_strings_cut_to_size() -> None:
    body = {"logs": ["short", "x" * (MAX_MESSAGE_CHARS + 10)] + ["y"] * MAX_ENTRIES}
    parsed = parse_logs(json.dumps(body).encode())
    assert parsed is not None
    assert len(parsed) == MAX_ENTRIES
    assert parsed[0] == "short"
    assert len(parsed[1]) == MAX_MESSAGE_CHARS
    for bad in (b"", b"[]", b'{"logs": "one"}', b'{"logs": [1]}', b'{"other": []}', b"\xff"):
        assert parse_logs(bad) is None, bad


def test_device_library_identifiers_are_masked() -> None:
    """They alone authorize a device's serial listing (stored only as SHA-256 elsewhere)."""
    device = "ceed8761e584e814ed4fe73cbb334ee9"
    message = (
        f"[2026-11-28 10:00:00 +0000] Register task (for device {device}, pass type "
        "pass.com.example.event, serial number ABC123; with web service url "
        f"https://tessera.example/v1/devices/{device}/registrations/pass.com.example.event/"
        "ABC123) encountered error: Authentication failure"
    )
    [stored] = parse_logs(json.dumps({"logs": [message]}).encode()) or [""]
    assert device not in stored
    assert "(for device [device], pass type pass.com.example.event, serial number ABC123" in stored
    assert "/v1/devices/[device]/registrations/pass.com.example.event/ABC123)" in stored


@pytest.mark.parametrize(
    "body",
    [
        b'{"logs": ' + b"[" * 5_000 + b"]" * 5_000 + b"}",  # RecursionError before issue 10 F07
        b'{"logs": ["\\ud800"]}',  # a lone surrogate, which BSON refused with a 500
        b'{"logs": ["ok"], "n": 99999999999999999999999}',
        b'{"logs": [NaN]}',
    ],
    ids=["deep", "surrogate", "huge integer", "NaN"],
)
def test_a_body_no_service_could_store_is_refused_with_one_log_line(
    body: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="services.events.device_logs"):
        assert parse_logs(body) is None
    (line,) = caplog.records
    assert line.getMessage().startswith("refused a device log body")
    assert line.exc_info is None


async def test_a_day_keeps_at_most_its_allowance(
    mongo_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(repository, "DEVICE_LOGS_PER_DAY", 3)
    client = create_client(mongo_url)
    db = client[f"t_{secrets.token_hex(6)}"]
    logs = DeviceLogs(db)
    await logs.ensure_indexes()
    today = datetime(2031, 3, 4, 10, tzinfo=UTC)
    try:
        assert await logs.add(["a", "b"], today) == 2
        assert await logs.add(["c", "d"], today) == 1
        assert await logs.add(["e"], today) == 0
        assert await logs.add(["f"], today + timedelta(days=1)) == 1
        page = await DeviceLogReads(db).page(PageRequest(limit=10))
        assert [log.message for log in page.items] == ["f", "c", "b", "a"]
    finally:
        await client.drop_database(db.name)
        await client.close()


async def test_posts_at_once_share_the_days_allowance(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each post reserves its entries before it writes them: twenty posts of five at once, with
    room for twelve, store twelve (each read the day as empty before)."""
    monkeypatch.setattr(repository, "DEVICE_LOGS_PER_DAY", 12)
    logs = DeviceLogs(db)
    await logs.ensure_indexes()
    today = datetime(2031, 3, 4, 10, tzinfo=UTC)
    stored = await asyncio.gather(*(logs.add([f"m{n}"] * 5, today) for n in range(20)))
    assert sum(stored) == 12
    assert await db["device_logs"].count_documents({}) == 12


async def test_one_address_takes_at_most_its_share_of_the_day(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ten posts of 100 entries from one address took the whole day's 1,000: the device logs
    of every real device were dropped until the next day. An address has a tenth of the day;
    the others still have theirs, and no address is stored in clear."""
    monkeypatch.setattr(repository, "DEVICE_LOGS_PER_DAY", 12)
    monkeypatch.setattr(repository, "DEVICE_LOGS_PER_ADDRESS_PER_DAY", 5)
    logs = DeviceLogs(db)
    await logs.ensure_indexes()
    today = datetime(2031, 3, 4, 10, tzinfo=UTC)
    assert await logs.add(["a"] * 4, today, "203.0.113.7") == 4
    assert await logs.add(["b"] * 4, today, "203.0.113.7") == 1
    assert await logs.add(["c"], today, "203.0.113.7") == 0
    assert await logs.add(["d"] * 4, today, "198.51.100.2") == 4
    assert await logs.add(["e"] * 10, today) == 3  # no address known: the day's rest
    counters = [doc["_id"] async for doc in db["device_log_days"].find()]
    assert not any("203.0.113.7" in counter for counter in counters)
