"""A verified Google callback becomes one pass event, exactly once, even across failures."""

import json
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, cast

import pytest
from faststream.nats import NatsBroker

from services.events.google_events import GoogleCallbacks, handle_callback
from services.events.google_verify import load_root_keys
from services.events.repository import GoogleNonces
from services.issuer.reads import IssuerReads
from shared.clock import SystemClock
from shared.errors import ApiError
from shared.google_ids import object_id
from shared.ids import new_id
from shared.messages import pass_event_adapter
from shared.mongo import Database, create_client
from tests.support.google_signer import GoogleSigner
from tests.support.records import pass_record

ISSUER = "3388000000022222222"


@dataclass
class FakeBroker:
    """Records what would be published; `fail` makes the next publish raise."""

    published: list[tuple[bytes, str, dict[str, str]]] = field(default_factory=list)
    fail: bool = False

    async def publish(self, body: bytes, subject: str, **kwargs: Any) -> None:
        if self.fail:
            self.fail = False
            raise ConnectionError("NATS is down")
        self.published.append((body, subject, kwargs["headers"]))


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


def _callbacks(db: Database, signer: GoogleSigner | None, broker: FakeBroker) -> GoogleCallbacks:
    roots = None if signer is None else load_root_keys(_json(signer.root_keys()))
    return GoogleCallbacks(
        nonces=GoogleNonces(db),
        passes=IssuerReads(db),
        broker=cast(NatsBroker, broker),
        clock=SystemClock(),
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
    broker = FakeBroker()
    callbacks = _callbacks(db, signer, broker)
    await callbacks.nonces.ensure_indexes()
    pass_id = await _stored_pass(db)
    for event_type in ("save", "del"):
        body = signer.body(
            recipient_id=ISSUER, object_id=object_id(ISSUER, pass_id), event_type=event_type
        )
        await handle_callback(callbacks, body)
    events = [pass_event_adapter.validate_json(body) for body, _, _ in broker.published]
    assert [e.event_type for e in events] == ["installed", "removed"]
    assert all(e.pass_id == pass_id and e.metadata == {"wallet": "google"} for e in events)
    assert [subject for _, subject, _ in broker.published] == [
        "tessera.events.pass.installed",
        "tessera.events.pass.removed",
    ]
    assert [h["Nats-Msg-Id"] for _, _, h in broker.published] == [e.id for e in events]


async def test_a_replayed_nonce_is_refused_with_409(db: Database, signer: GoogleSigner) -> None:
    broker = FakeBroker()
    callbacks = _callbacks(db, signer, broker)
    pass_id = await _stored_pass(db)
    body = signer.body(recipient_id=ISSUER, object_id=object_id(ISSUER, pass_id))
    await handle_callback(callbacks, body)
    error = await _refused(callbacks, body)
    assert (error.status, error.code) == (409, "google_callback_replayed")
    assert len(broker.published) == 1


async def test_a_failed_publish_is_retried_as_the_same_event(
    db: Database, signer: GoogleSigner
) -> None:
    broker = FakeBroker(fail=True)
    callbacks = _callbacks(db, signer, broker)
    pass_id = await _stored_pass(db)
    body = signer.body(recipient_id=ISSUER, object_id=object_id(ISSUER, pass_id))
    error = await _refused(callbacks, body)
    assert error.status == 503  # Google retries a 5xx
    retried = await handle_callback(callbacks, body)
    assert [h["Nats-Msg-Id"] for _, _, h in broker.published] == [retried.id]
    assert (await _refused(callbacks, body)).status == 409


async def test_an_object_without_a_pass_is_404(db: Database, signer: GoogleSigner) -> None:
    broker = FakeBroker()
    callbacks = _callbacks(db, signer, broker)
    for resource in (object_id(ISSUER, new_id("pass")), f"{ISSUER}.tmpl_notapass"):
        error = await _refused(callbacks, signer.body(recipient_id=ISSUER, object_id=resource))
        assert error.status == 404
    assert broker.published == []


async def test_without_root_keys_every_callback_is_503(db: Database, signer: GoogleSigner) -> None:
    broker = FakeBroker()
    callbacks = _callbacks(db, None, broker)
    pass_id = await _stored_pass(db)
    body = signer.body(recipient_id=ISSUER, object_id=object_id(ISSUER, pass_id))
    error = await _refused(callbacks, body)
    assert (error.status, error.code) == (503, "google_callbacks_not_configured")
    assert broker.published == []


@pytest.mark.parametrize(
    "body",
    [b"[" * 50_000, b'{"protocolVersion": "\\ud800"}', b'{"a": 1e400}'],
    ids=["deep", "surrogate", "infinite"],
)
async def test_json_no_service_could_store_is_a_400(
    db: Database, signer: GoogleSigner, body: bytes
) -> None:
    """Issue 10 F07: these were 500s, which Google retries."""
    broker = FakeBroker()
    error = await _refused(_callbacks(db, signer, broker), body)
    assert (error.status, error.code) == (400, "google_callback_malformed")
    assert broker.published == []
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
    broker = FakeBroker()
    callbacks = _callbacks(db, signer, broker)
    pass_id = await _stored_pass(db)
    arguments = {"recipient_id": ISSUER, "object_id": object_id(ISSUER, pass_id)} | overrides
    error = await _refused(callbacks, signer.body(**arguments))
    assert (error.status, error.code) == (status, code)
    assert error.envelope()["error"]["message"]
    assert broker.published == []
    assert await db["google_callback_nonces"].count_documents({}) == 0
