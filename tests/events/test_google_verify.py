"""Google Wallet callback verification against a signer that follows Google's format."""

import base64
import hashlib
import json
import struct
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from services.events.google_verify import (
    BadMessageSignature,
    CallbackRejected,
    IntermediateKeyExpired,
    MalformedCallback,
    MessageExpired,
    NoValidIntermediateSignature,
    RootKey,
    WrongProtocol,
    WrongRecipient,
    length_value,
    load_root_keys,
    verify_callback,
)
from tests.support.google_signer import HOUR_MS, GoogleSigner

ISSUER = "3388000000022222222"
OBJECT_ID = f"{ISSUER}.pass_0Mx3ZyXwVuTsRqPoNmLkJi"
CLASS_ID = f"{ISSUER}.tmpl_0Mx3AbCdEfGhIjKlMnOpQr"
NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
NOW_MS = int(NOW.timestamp() * 1000)


@pytest.fixture
def signer() -> GoogleSigner:
    return GoogleSigner()


def _roots(signer: GoogleSigner, expires_ms: int = NOW_MS + 24 * HOUR_MS) -> list[RootKey]:
    return load_root_keys(json.dumps(signer.root_keys(expires_ms)).encode())


def _callback(signer: GoogleSigner, **overrides: Any) -> dict[str, Any]:
    arguments: dict[str, Any] = {
        "recipient_id": ISSUER,
        "object_id": OBJECT_ID,
        "class_id": CLASS_ID,
        "nonce": "nonce-1",
        "exp_ms": NOW_MS + HOUR_MS,
        "key_exp_ms": NOW_MS + HOUR_MS,
    }
    return signer.callback(**(arguments | overrides))


def _verify(signer: GoogleSigner, body: dict[str, Any] | bytes, **kwargs: Any) -> Any:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    arguments: dict[str, Any] = {"root_keys": _roots(signer), "issuer_id": ISSUER, "now": NOW}
    return verify_callback(raw, **(arguments | kwargs))


@pytest.mark.parametrize("event_type", ["save", "del"])
def test_a_valid_callback_verifies(signer: GoogleSigner, event_type: str) -> None:
    message = _verify(signer, _callback(signer, event_type=event_type))
    assert message.event_type == event_type
    assert (message.object_id, message.class_id, message.nonce) == (OBJECT_ID, CLASS_ID, "nonce-1")
    assert message.expires_at == NOW + timedelta(hours=1)


def test_the_newer_sender_id_is_accepted_too(signer: GoogleSigner) -> None:
    body = _callback(signer, sender_id="GoogleWalletPasses")
    assert _verify(signer, body).nonce == "nonce-1"


def test_an_unknown_sender_id_is_refused(signer: GoogleSigner) -> None:
    with pytest.raises(NoValidIntermediateSignature):
        _verify(signer, _callback(signer, sender_id="SomeoneElse"))


def test_expiry_given_as_a_json_number_or_a_string_is_read(signer: GoogleSigner) -> None:
    message = {
        "classId": CLASS_ID,
        "objectId": OBJECT_ID,
        "eventType": "save",
        "nonce": "n",
        "expTimeMillis": str(NOW_MS + 1000),
    }
    assert _verify(signer, _callback(signer, message=message)).nonce == "n"


def test_a_tampered_message_fails_its_signature(signer: GoogleSigner) -> None:
    body = _callback(signer, event_type="save")
    body["signedMessage"] = body["signedMessage"].replace('"save"', '"del"')
    with pytest.raises(BadMessageSignature):
        _verify(signer, body)


def test_a_message_signed_by_another_key_fails(signer: GoogleSigner) -> None:
    body = _callback(signer)
    body["signature"] = _callback(GoogleSigner(root=signer.root))["signature"]
    with pytest.raises(BadMessageSignature):
        _verify(signer, body)


def test_an_intermediate_key_not_signed_by_a_root_is_refused(signer: GoogleSigner) -> None:
    impostor = ec.generate_private_key(ec.SECP256R1())
    with pytest.raises(NoValidIntermediateSignature):
        _verify(signer, _callback(signer, intermediate_signer=impostor))


def test_a_swapped_intermediate_key_is_refused(signer: GoogleSigner) -> None:
    """A genuine root signature does not cover a different signedKey."""
    body = _callback(signer)
    other = _callback(GoogleSigner(root=signer.root))
    body["intermediateSigningKey"]["signedKey"] = other["intermediateSigningKey"]["signedKey"]
    with pytest.raises(NoValidIntermediateSignature):
        _verify(signer, body)


def test_one_good_signature_among_several_is_enough(signer: GoogleSigner) -> None:
    body = _callback(signer)
    signatures = body["intermediateSigningKey"]["signatures"]
    bad = _callback(signer, intermediate_signer=ec.generate_private_key(ec.SECP256R1()))
    body["intermediateSigningKey"]["signatures"] = [
        *bad["intermediateSigningKey"]["signatures"],
        *signatures,
    ]
    assert _verify(signer, body).nonce == "nonce-1"


def test_an_expired_root_key_signs_nothing(signer: GoogleSigner) -> None:
    with pytest.raises(NoValidIntermediateSignature):
        _verify(signer, _callback(signer), root_keys=_roots(signer, expires_ms=NOW_MS))


def test_an_expired_intermediate_key_is_refused(signer: GoogleSigner) -> None:
    with pytest.raises(IntermediateKeyExpired):
        _verify(signer, _callback(signer, key_exp_ms=NOW_MS - 1))


def test_an_expired_message_is_refused(signer: GoogleSigner) -> None:
    with pytest.raises(MessageExpired):
        _verify(signer, _callback(signer, exp_ms=NOW_MS))
    # Expiry is exact to the millisecond.
    assert _verify(signer, _callback(signer, exp_ms=NOW_MS + 1)).nonce == "nonce-1"


def test_an_expiry_beyond_any_date_is_malformed(signer: GoogleSigner) -> None:
    with pytest.raises(MalformedCallback):
        _verify(signer, _callback(signer, exp_ms=2**53 - 1))


def test_an_expiry_of_thousands_of_digits_is_malformed_signed_or_forged(
    signer: GoogleSigner,
) -> None:
    """int() refuses a string of over 4,300 digits with a ValueError: it was a 500, even for
    a forged message (parsed, unverified, to tell why its signature failed)."""
    message = {
        "classId": CLASS_ID,
        "objectId": OBJECT_ID,
        "eventType": "save",
        "nonce": "n",
        "expTimeMillis": "9" * 4301,
    }
    with pytest.raises(MalformedCallback):
        _verify(signer, _callback(signer, message=message))
    forged = _callback(signer)
    forged["signedMessage"] = json.dumps(message)
    with pytest.raises(BadMessageSignature):
        _verify(signer, forged)


def test_a_message_for_another_issuer_is_refused(signer: GoogleSigner) -> None:
    other = "3388000000099999999"
    body = _callback(
        signer,
        recipient_id=other,
        object_id=f"{other}.pass_0Mx3ZyXwVuTsRqPoNmLkJi",
        class_id=f"{other}.tmpl_0Mx3AbCdEfGhIjKlMnOpQr",
    )
    with pytest.raises(WrongRecipient):
        _verify(signer, body)
    # Signed for the other issuer, it verifies there: the recipient is part of the signature.
    assert _verify(signer, body, issuer_id=other).nonce == "nonce-1"


def test_a_message_signed_for_us_about_another_issuers_object_is_refused(
    signer: GoogleSigner,
) -> None:
    body = _callback(signer, object_id="3388000000099999999.pass_0Mx3ZyXwVuTsRqPoNmLkJi")
    with pytest.raises(WrongRecipient):
        _verify(signer, body)


def test_a_signature_for_another_recipient_with_our_ids_is_a_bad_signature(
    signer: GoogleSigner,
) -> None:
    with pytest.raises(BadMessageSignature):
        _verify(signer, _callback(signer, recipient_id="3388000000099999999"))


def test_another_protocol_version_is_refused(signer: GoogleSigner) -> None:
    with pytest.raises(WrongProtocol):
        _verify(signer, _callback(signer, protocol="ECv2"))


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"not json",
        b"[]",
        b'{"protocolVersion": "ECv2SigningOnly"}',
        b"\xff\xfe",
    ],
)
def test_malformed_bodies_are_refused(signer: GoogleSigner, body: bytes) -> None:
    with pytest.raises(MalformedCallback):
        _verify(signer, body)


def _unstorable() -> list[tuple[str, Any]]:
    """Bodies that gave a 500 (RecursionError, UnicodeEncodeError) before issue 10 F07."""
    deep: Any = "x"
    for _ in range(40):
        deep = [deep]
    return [
        ("deep body", lambda signer: b"[" * 100_000),
        ("deep object", lambda signer: b'{"a":' * 50_000),
        (
            "lone surrogate in signedKey",
            lambda signer: _dumps(_with_key(_callback(signer), signedKey="\ud800")),
        ),
        ("lone surrogate key", lambda signer: _dumps(_callback(signer) | {"\udfff": 1})),
        ("NaN", lambda signer: _dumps(_callback(signer) | {"signature": float("nan")})),
        ("65-bit integer", lambda signer: _dumps(_callback(signer) | {"signature": 2**64})),
        (
            "deep signed message",
            lambda signer: _dumps(
                _callback(
                    signer,
                    message={
                        "classId": CLASS_ID,
                        "objectId": OBJECT_ID,
                        "eventType": "save",
                        "nonce": "n",
                        "expTimeMillis": NOW_MS + HOUR_MS,
                        "extra": deep,
                    },
                )
            ),
        ),
    ]


def _dumps(body: dict[str, Any]) -> bytes:
    # ASCII: a lone surrogate goes out as the escape `\ud800`, as an attacker would send it.
    return json.dumps(body).encode()


@pytest.mark.parametrize(("name", "make"), _unstorable(), ids=[u[0] for u in _unstorable()])
def test_json_no_service_could_store_is_malformed(
    signer: GoogleSigner, name: str, make: Any
) -> None:
    with pytest.raises(MalformedCallback, match="acceptable JSON"):
        _verify(signer, make(signer))


def _mutations() -> list[tuple[str, Any]]:
    return [
        ("no signedMessage", lambda b: {k: v for k, v in b.items() if k != "signedMessage"}),
        ("no signedKey", lambda b: b | {"intermediateSigningKey": {"signatures": ["AA=="]}}),
        ("signature not base64", lambda b: b | {"signature": "***"}),
        ("signatures empty", lambda b: _with_key(b, signatures=[])),
        ("signatures not a list", lambda b: _with_key(b, signatures="x")),
        # Each would be verified under every root key, before anything is authenticated.
        ("thousands of signatures", lambda b: _with_key(b, signatures=["MAYCAQECAQE="] * 4000)),
        ("signedKey not a string", lambda b: _with_key(b, signedKey={"a": 1})),
        ("signedMessage not a string", lambda b: b | {"signedMessage": {"a": 1}}),
    ]


def _with_key(body: dict[str, Any], **changes: Any) -> dict[str, Any]:
    return body | {"intermediateSigningKey": body["intermediateSigningKey"] | changes}


@pytest.mark.parametrize(("name", "mutate"), _mutations(), ids=[m[0] for m in _mutations()])
def test_malformed_envelopes_are_refused(signer: GoogleSigner, name: str, mutate: Any) -> None:
    with pytest.raises(MalformedCallback):
        _verify(signer, mutate(_callback(signer)))


def test_keys_besides_the_protocols_are_ignored_wherever_they_are(signer: GoogleSigner) -> None:
    """Issue 15: an extra key was a 400, which Google never retries. Tink's recipient ignores
    extra keys in signedKey and signedMessage; here those of the body and of
    intermediateSigningKey are ignored too (unsigned, never read)."""
    message = {
        "classId": CLASS_ID,
        "objectId": OBJECT_ID,
        "eventType": "save",
        "nonce": "n",
        "expTimeMillis": NOW_MS + HOUR_MS,
        "newField": {"a": [1, 2]},
    }
    body = _callback(signer, message=message, signed_key_extra={"keyVersion": "2"})
    body |= {"newTopLevel": "x", "anotherOne": [1]}
    body["intermediateSigningKey"] |= {"keyId": "k1"}
    verified = _verify(signer, body)
    assert (verified.object_id, verified.event_type, verified.nonce) == (OBJECT_ID, "save", "n")


@pytest.mark.parametrize(
    ("message", "event_type", "nonce"),
    [
        ({"eventType": "open", "nonce": "n"}, "open", "n"),
        ({"nonce": "n"}, "", "n"),
        ({"eventType": 7, "nonce": "n"}, "", "n"),
        ({"eventType": "del", "nonce": ""}, "del", ""),
        ({"eventType": "del"}, "del", ""),
        ({"eventType": "del", "nonce": 12}, "del", ""),
    ],
)
def test_an_odd_event_type_or_nonce_is_returned_for_the_caller_to_judge(
    signer: GoogleSigner, message: dict[str, Any], event_type: str, nonce: str
) -> None:
    signed = {"objectId": OBJECT_ID, "expTimeMillis": NOW_MS + HOUR_MS} | message
    verified = _verify(signer, _callback(signer, message=signed))
    assert (verified.event_type, verified.nonce, verified.class_id) == (event_type, nonce, None)
    digest = hashlib.sha256(json.dumps(signed).encode()).hexdigest()
    assert verified.digest == digest


@pytest.mark.parametrize(
    "message",
    [
        {"classId": CLASS_ID, "eventType": "save", "nonce": "n", "expTimeMillis": NOW_MS + 1},
        {"classId": CLASS_ID, "objectId": OBJECT_ID, "eventType": "save", "nonce": "n"},
        {
            "classId": CLASS_ID,
            "objectId": OBJECT_ID,
            "eventType": "save",
            "nonce": "n",
            "expTimeMillis": "soon",
        },
        {"classId": 5, "objectId": OBJECT_ID, "expTimeMillis": NOW_MS + 1},
    ],
    ids=["no objectId", "no expTimeMillis", "expTimeMillis not a time", "classId not a string"],
)
def test_signed_but_malformed_messages_are_refused(
    signer: GoogleSigner, message: dict[str, Any]
) -> None:
    with pytest.raises(MalformedCallback):
        _verify(signer, _callback(signer, message=message))


def test_every_refusal_is_a_callback_rejected_with_a_reason() -> None:
    for cls in (
        MalformedCallback,
        WrongProtocol,
        NoValidIntermediateSignature,
        IntermediateKeyExpired,
        BadMessageSignature,
        WrongRecipient,
        MessageExpired,
    ):
        assert issubclass(cls, CallbackRejected)
        assert cls.reason != CallbackRejected.reason


def test_length_value_is_four_byte_little_endian_prefixes() -> None:
    assert length_value("ab", "") == b"\x02\x00\x00\x00ab\x00\x00\x00\x00"
    assert length_value("é") == struct.pack("<I", 2) + "é".encode()


def test_root_keys_keep_only_ecv2_signing_only_keys_with_an_expiry(signer: GoogleSigner) -> None:
    document = signer.root_keys(NOW_MS + HOUR_MS)
    entry = document["keys"][0]
    document["keys"] += [
        entry | {"protocolVersion": "ECv1"},
        {k: v for k, v in entry.items() if k != "keyExpiration"},
    ]
    (key,) = load_root_keys(json.dumps(document).encode())
    assert key.expires_at == NOW + timedelta(hours=1)


@pytest.mark.parametrize(
    ("document", "problem"),
    [
        (b"nope", "not JSON"),
        (b"[]", '{"keys"'),
        (b'{"keys": []}', "no ECv2SigningOnly key"),
        (b'{"keys": [{"protocolVersion": "ECv1", "keyValue": "x"}]}', "no ECv2SigningOnly key"),
        (
            b'{"keys": [{"protocolVersion": "ECv2SigningOnly", "keyValue": "AAAA",'
            b' "keyExpiration": "1"}]}',
            "unusable",
        ),
    ],
)
def test_bad_root_key_files_are_refused(document: bytes, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        load_root_keys(document)


def test_a_root_key_on_another_curve_is_refused() -> None:
    der = (
        ec.generate_private_key(ec.SECP384R1())
        .public_key()
        .public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    entry = {
        "keyValue": base64.b64encode(der).decode(),
        "protocolVersion": "ECv2SigningOnly",
        "keyExpiration": str(NOW_MS),
    }
    with pytest.raises(ValueError, match="P-256"):
        load_root_keys(json.dumps({"keys": [entry]}).encode())
