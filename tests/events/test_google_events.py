"""A verified Google callback becomes one pass event, exactly once, even across failures: the
nonce and the event (in the events service's outbox) are committed together or not at all."""

import json
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

from services.events.events_out import events_outbox
from services.events.google_events import GoogleCallbacks, handle_callback
from services.events.google_verify import load_root_keys
from services.events.repository import GoogleNonces
from services.issuer.reads import IssuerReads
from shared.clock import SystemClock
from shared.errors import ApiError
from shared.google_ids import object_id
from shared.ids import new_id
from shared.messages import PassEventMessage, pass_event_adapter
from shared.mongo import Database, create_client
from tests.support.google_signer import GoogleSigner
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
async def db(mongo_url: str) -> AsyncIterator[Database]:
    client = create_client(mongo_url)
    database = client[f"t_{secrets.token_hex(6)}"]
    try:
        yield database
    finally:
        await client.drop_database(database.name)
        await client.close()


@pytest.fixture
def signer() -> GoogleSigner:
    return GoogleSigner()


def _callbacks(
    db: Database, signer: GoogleSigner | None, clock: StoppedClock | None = None
) -> GoogleCallbacks:
    roots = None if signer is None else load_root_keys(_json(signer.root_keys()))
    return GoogleCallbacks(
        nonces=GoogleNonces(db, events_outbox(db)),
        passes=IssuerReads(db),
        clock=clock or SystemClock(),
        issuer_id=ISSUER,
        root_keys=roots,
    )


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


async def test_a_replayed_nonce_is_refused_with_409(db: Database, signer: GoogleSigner) -> None:
    callbacks = _callbacks(db, signer)
    pass_id = await _stored_pass(db)
    body = signer.body(recipient_id=ISSUER, object_id=object_id(ISSUER, pass_id))
    await handle_callback(callbacks, body)
    error = await _refused(callbacks, body)
    assert (error.status, error.code) == (409, "google_callback_replayed")
    assert len(await Outboxed(db).events()) == 1


async def test_a_failed_write_stores_neither_nonce_nor_event_and_the_retry_records_once(
    db: Database, signer: GoogleSigner
) -> None:
    """The event's write fails (a unique index the test adds refuses it): the nonce is not
    stored either, the answer is 503 (Google retries a 5xx), and the retry records the
    callback once; a replay after it is refused."""
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
    assert (await _refused(callbacks, body)).status == 409
    assert len(await Outboxed(db).events()) == 1


async def test_an_object_without_a_pass_is_404(db: Database, signer: GoogleSigner) -> None:
    callbacks = _callbacks(db, signer)
    for resource in (object_id(ISSUER, new_id("pass")), f"{ISSUER}.tmpl_notapass"):
        error = await _refused(callbacks, signer.body(recipient_id=ISSUER, object_id=resource))
        assert error.status == 404
    assert await Outboxed(db).events() == []


async def test_without_root_keys_every_callback_is_503(db: Database, signer: GoogleSigner) -> None:
    callbacks = _callbacks(db, None)
    pass_id = await _stored_pass(db)
    body = signer.body(recipient_id=ISSUER, object_id=object_id(ISSUER, pass_id))
    error = await _refused(callbacks, body)
    assert (error.status, error.code) == (503, "google_callbacks_not_configured")
    assert await Outboxed(db).events() == []


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
