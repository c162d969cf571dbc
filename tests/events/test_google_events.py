"""A verified Google callback becomes one pass event, exactly once, even across failures: the
nonce and the event (in the events service's outbox) are committed together or not at all.
Whatever Google signed is acknowledged (a repeated nonce, an unknown eventType, extra keys);
root keys fetched from a key server on a real socket are used and refreshed after expiry."""

import json
import logging
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx2
import pytest

from services.events.events_out import events_outbox
from services.events.google_events import GoogleCallbacks, handle_callback
from services.events.google_root_keys import FetchedRootKeys, RootKeySource, StaticRootKeys
from services.events.google_verify import load_root_keys
from services.events.repository import GoogleNonces
from services.issuer.reads import IssuerReads
from shared.clock import SystemClock
from shared.errors import ApiError
from shared.google_ids import object_id
from shared.ids import new_id
from shared.messages import PassEventMessage, pass_event_adapter
from shared.mongo import Database
from tests.support.fake_google_keys import FakeGoogleKeys, running_fake_google_keys
from tests.support.google_signer import HOUR_MS, GoogleSigner
from tests.support.records import pass_record

ISSUER = "3388000000022222222"


@dataclass
class Outboxed:
    """What the callbacks committed to the events service's outbox, for its relay to publish."""

    db: Database

    async def events(self) -> list[tuple[str, PassEventMessage]]:
        """(subject, event) of each document, in `_id` order."""
        documents = await self.db["events_outbox"].find().sort("_id").to_list()
        return [
            (doc["subject"], pass_event_adapter.validate_json(doc["payload"])) for doc in documents
        ]


class StoppedClock:
    def __init__(self) -> None:
        self.moment = datetime.now(UTC)

    def now(self) -> datetime:
        return self.moment


@pytest.fixture
def signer() -> GoogleSigner:
    return GoogleSigner()


def _callbacks(
    db: Database,
    signer: GoogleSigner | None,
    clock: StoppedClock | None = None,
    roots: RootKeySource | None = None,
) -> GoogleCallbacks:
    if roots is None:
        assert signer is not None
        roots = StaticRootKeys(load_root_keys(_json(signer.root_keys())))
    return GoogleCallbacks(
        nonces=GoogleNonces(db, events_outbox(db)),
        passes=IssuerReads(db),
        clock=clock or SystemClock(),
        issuer_id=ISSUER,
        root_keys=roots,
    )


@pytest.fixture(scope="module")
def key_server() -> Iterator[FakeGoogleKeys]:
    with running_fake_google_keys() as fake:
        yield fake


def _fetching(key_server: FakeGoogleKeys) -> FetchedRootKeys:
    return FetchedRootKeys(key_server.url, httpx2.AsyncClient(timeout=5.0))


def _json(document: dict[str, Any]) -> bytes:
    return json.dumps(document).encode()


async def _stored_pass(db: Database) -> str:
    record = pass_record(_id=new_id("pass"), short_id=secrets.token_hex(8))
    await db["passes"].insert_one(record.to_document())
    return record.id


async def _refused(callbacks: GoogleCallbacks, body: bytes) -> ApiError:
    with pytest.raises(ApiError) as caught:
        await handle_callback(callbacks, body)
    return caught.value


async def test_save_and_del_become_installed_and_removed(
    db: Database, signer: GoogleSigner
) -> None:
    callbacks = _callbacks(db, signer)
    await callbacks.nonces.ensure_indexes()
    pass_id = await _stored_pass(db)
    returned = []
    for event_type in ("save", "del"):
        body = signer.body(
            recipient_id=ISSUER, object_id=object_id(ISSUER, pass_id), event_type=event_type
        )
        returned.append(await handle_callback(callbacks, body))
    committed = await Outboxed(db).events()
    events = [event for _, event in committed]
    assert [e.event_type for e in events] == ["installed", "removed"]
    assert all(e.pass_id == pass_id and e.metadata == {"wallet": "google"} for e in events)
    assert [subject for subject, _ in committed] == [
        "tessera.events.pass.installed",
        "tessera.events.pass.removed",
    ]
    assert events == returned


async def test_a_repeated_nonce_is_acknowledged_and_recorded_once(
    db: Database, signer: GoogleSigner
) -> None:
    """Issue 15: a repeated delivery was a 409, which Google does not retry; harmless, but a
    4xx for a genuine callback. Now it is a 200 (None: nothing recorded)."""
    callbacks = _callbacks(db, signer)
    pass_id = await _stored_pass(db)
    body = signer.body(recipient_id=ISSUER, object_id=object_id(ISSUER, pass_id), nonce="n-1")
    assert await handle_callback(callbacks, body) is not None
    assert await handle_callback(callbacks, body) is None
    # The same nonce in another message (Google's retry signs it again) is the same callback.
    again = signer.body(recipient_id=ISSUER, object_id=object_id(ISSUER, pass_id), nonce="n-1")
    assert await handle_callback(callbacks, again) is None
    assert len(await Outboxed(db).events()) == 1


@pytest.mark.parametrize("nonce", [None, "", 42, "n" * 129], ids=["absent", "empty", "int", "long"])
async def test_without_a_usable_nonce_the_signed_message_is_the_key(
    db: Database, signer: GoogleSigner, nonce: object
) -> None:
    """Decision: record it (the holder did add the pass) and deduplicate by the digest of the
    signed text, which a repeated delivery repeats: nothing twice, nothing lost."""
    callbacks = _callbacks(db, signer)
    pass_id = await _stored_pass(db)

    def body(event_type: str) -> bytes:
        message: dict[str, Any] = {
            "classId": f"{ISSUER}.tmpl_x",
            "objectId": object_id(ISSUER, pass_id),
            "expTimeMillis": str(int(datetime.now(UTC).timestamp() * 1000) + HOUR_MS),
            "eventType": event_type,
        }
        if nonce is not None:
            message["nonce"] = nonce
        return signer.body(recipient_id=ISSUER, object_id="", message=message)

    save = body("save")
    assert await handle_callback(callbacks, save) is not None
    assert await handle_callback(callbacks, save) is None
    assert await handle_callback(callbacks, body("del")) is not None
    events = [event.event_type for _, event in await Outboxed(db).events()]
    assert events == ["installed", "removed"]
    keys = await db["google_callback_nonces"].distinct("_id")
    assert len(keys) == 2
    assert all(key.startswith("sha256:") for key in keys)


async def test_an_unknown_event_type_is_acknowledged_and_logged_without_an_event(
    db: Database, signer: GoogleSigner, caplog: pytest.LogCaptureFixture
) -> None:
    callbacks = _callbacks(db, signer)
    pass_id = await _stored_pass(db)
    body = signer.body(
        recipient_id=ISSUER, object_id=object_id(ISSUER, pass_id), event_type="unsave"
    )
    with caplog.at_level(logging.WARNING, logger="services.events.google_events"):
        assert await handle_callback(callbacks, body) is None
    assert "'unsave'" in caplog.text
    assert await Outboxed(db).events() == []
    assert await db["google_callback_nonces"].count_documents({}) == 0


async def test_a_callback_with_extra_keys_is_recorded(db: Database, signer: GoogleSigner) -> None:
    callbacks = _callbacks(db, signer)
    pass_id = await _stored_pass(db)
    body = signer.callback(
        recipient_id=ISSUER, object_id=object_id(ISSUER, pass_id), signed_key_extra={"v": 2}
    )
    body |= {"extra": 1}
    body["intermediateSigningKey"] |= {"extra": 2}
    event = await handle_callback(callbacks, _json(body))
    assert event is not None
    assert event.event_type == "installed"
    assert len(await Outboxed(db).events()) == 1


async def test_a_failed_write_stores_neither_nonce_nor_event_and_the_retry_records_once(
    db: Database, signer: GoogleSigner
) -> None:
    """The event's write fails (a unique index the test adds refuses it): the nonce is not
    stored either, the answer is 503 (Google retries a 5xx), and the retry records the
    callback once; a replay after it records nothing."""
    clock = StoppedClock()
    callbacks = _callbacks(db, signer, clock)
    pass_id = await _stored_pass(db)
    body = signer.body(recipient_id=ISSUER, object_id=object_id(ISSUER, pass_id))
    outbox = db["events_outbox"]
    index = await outbox.create_index("created_at", unique=True)
    await outbox.insert_one({"_id": "blocker", "created_at": clock.moment})
    error = await _refused(callbacks, body)
    assert error.status == 503
    assert await db["google_callback_nonces"].count_documents({}) == 0
    await outbox.delete_one({"_id": "blocker"})
    await outbox.drop_index(index)
    retried = await handle_callback(callbacks, body)
    assert [event for _, event in await Outboxed(db).events()] == [retried]
    assert await handle_callback(callbacks, body) is None
    assert len(await Outboxed(db).events()) == 1


async def test_an_object_without_a_pass_is_404(db: Database, signer: GoogleSigner) -> None:
    callbacks = _callbacks(db, signer)
    for resource in (object_id(ISSUER, new_id("pass")), f"{ISSUER}.tmpl_notapass"):
        error = await _refused(callbacks, signer.body(recipient_id=ISSUER, object_id=resource))
        assert error.status == 404
    assert await Outboxed(db).events() == []


async def test_without_root_keys_every_callback_is_503(
    db: Database, signer: GoogleSigner, key_server: FakeGoogleKeys
) -> None:
    key_server.serve({}, status=500)
    roots = _fetching(key_server)
    callbacks = _callbacks(db, signer, roots=roots)
    pass_id = await _stored_pass(db)
    body = signer.body(recipient_id=ISSUER, object_id=object_id(ISSUER, pass_id))
    try:
        error = await _refused(callbacks, body)
    finally:
        await roots.aclose()
    assert (error.status, error.code) == (503, "google_root_keys_unavailable")
    assert await Outboxed(db).events() == []


async def test_a_root_keys_file_whose_keys_all_expired_answers_503_not_401(
    db: Database, signer: GoogleSigner
) -> None:
    """Google retries a 5xx, not a 401: the callbacks that come once the file's keys expired
    are recorded after the operator refreshes it, rather than lost as badly signed."""
    clock = StoppedClock()
    expired_ms = int(clock.moment.timestamp() * 1000) - 1
    roots = StaticRootKeys(load_root_keys(_json(signer.root_keys(expired_ms))))
    callbacks = _callbacks(db, signer, clock, roots)
    pass_id = await _stored_pass(db)
    body = signer.body(recipient_id=ISSUER, object_id=object_id(ISSUER, pass_id))
    error = await _refused(callbacks, body)
    assert (error.status, error.code) == (503, "google_root_keys_unavailable")


async def test_fetched_root_keys_are_used_and_refreshed_after_their_expiry(
    db: Database, key_server: FakeGoogleKeys
) -> None:
    """Acceptance 5 (issue 15): the keys come from the key server, are fetched once while
    valid, and the key Google rotated in is fetched once the first has expired. A body that is
    no callback never makes the service fetch."""
    clock = StoppedClock()
    now_ms = int(clock.moment.timestamp() * 1000)
    old, new = GoogleSigner(), GoogleSigner()
    key_server.serve(old.root_keys(now_ms + HOUR_MS), {"Cache-Control": "max-age=86400"})
    key_server.fetches = 0
    roots = _fetching(key_server)
    callbacks = _callbacks(db, None, clock, roots)
    pass_id = await _stored_pass(db)
    target = {"recipient_id": ISSUER, "object_id": object_id(ISSUER, pass_id)}

    def signed(signer: GoogleSigner, event_type: str) -> bytes:
        at = int(clock.moment.timestamp() * 1000)
        return signer.body(
            **target, event_type=event_type, exp_ms=at + HOUR_MS, key_exp_ms=at + HOUR_MS
        )

    try:
        assert (await _refused(callbacks, b"not json")).status == 400
        assert key_server.fetches == 0
        assert await handle_callback(callbacks, signed(old, "save")) is not None
        assert (await _refused(callbacks, signed(new, "del"))).status == 401
        assert key_server.fetches == 1
        rotated = [
            *old.root_keys(now_ms + HOUR_MS)["keys"],
            *new.root_keys(now_ms + 9 * HOUR_MS)["keys"],
        ]
        key_server.serve({"keys": rotated}, {"Cache-Control": "max-age=86400"})
        clock.moment += timedelta(hours=1)
        assert await handle_callback(callbacks, signed(new, "del")) is not None
        assert key_server.fetches == 2
        assert (await _refused(callbacks, signed(old, "save"))).status == 401
    finally:
        await roots.aclose()
    assert [event.event_type for _, event in await Outboxed(db).events()] == [
        "installed",
        "removed",
    ]


@pytest.mark.parametrize(
    "body",
    [b"[" * 50_000, b'{"protocolVersion": "\\ud800"}', b'{"a": 1e400}'],
    ids=["deep", "surrogate", "infinite"],
)
async def test_json_no_service_could_store_is_a_400(
    db: Database, signer: GoogleSigner, body: bytes
) -> None:
    """Issue 10 F07: these were 500s, which Google retries."""
    error = await _refused(_callbacks(db, signer), body)
    assert (error.status, error.code) == (400, "google_callback_malformed")
    assert await Outboxed(db).events() == []
    assert await db["google_callback_nonces"].count_documents({}) == 0


@pytest.mark.parametrize(
    ("overrides", "status", "code"),
    [
        ({"protocol": "ECv2"}, 400, "google_callback_wrong_protocol"),
        ({"recipient_id": "3388000000099999999"}, 401, "google_callback_wrong_recipient"),
        ({"sender_id": "Someone"}, 401, "google_callback_bad_intermediate_signature"),
        ({"exp_ms": 1}, 401, "google_callback_message_expired"),
        ({"key_exp_ms": 1}, 401, "google_callback_intermediate_key_expired"),
    ],
)
async def test_refusals_map_to_statuses(
    db: Database, signer: GoogleSigner, overrides: dict[str, Any], status: int, code: str
) -> None:
    callbacks = _callbacks(db, signer)
    pass_id = await _stored_pass(db)
    arguments = {"recipient_id": ISSUER, "object_id": object_id(ISSUER, pass_id)} | overrides
    error = await _refused(callbacks, signer.body(**arguments))
    assert (error.status, error.code) == (status, code)
    assert error.envelope()["error"]["message"]
    assert await Outboxed(db).events() == []
    assert await db["google_callback_nonces"].count_documents({}) == 0
