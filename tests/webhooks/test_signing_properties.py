"""Property tests of webhook signing: for any body and timestamp, both of our signatures verify
with independent verifiers (stripe's and the Standard Webhooks reference library), with each
of the secrets an attempt is signed with during a rotation, and any single-byte change of the
body makes them fail."""

import json
import time
from datetime import UTC, datetime

import pytest
import stripe
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from services.webhooks.secretbox import new_secret
from services.webhooks.signing import signature_headers, standard_signature, stripe_signature

SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.filter_too_much]
)
EVER = 10**11  # a stripe tolerance that accepts any generated timestamp
TIMESTAMPS = st.integers(min_value=0, max_value=2**33)
NEAR_NOW = st.integers(min_value=-240, max_value=240)  # Standard Webhooks refuses >5 min skew
DELIVERY_IDS = st.from_regex(r"\Awhd_[A-Za-z0-9]{1,24}\Z")
# Deliveries are JSON (the Standard Webhooks library parses the body after checking it).
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)
JSON_BODIES = st.builds(lambda value: json.dumps(value, ensure_ascii=False), JSON_VALUES)


def _mutated(body: str, position: int, byte: int) -> bytes | None:
    """`body` with one byte replaced (None when the change is no change or not UTF-8)."""
    data = bytearray(body.encode())
    index = position % len(data)
    if data[index] == byte:
        return None
    data[index] = byte
    try:
        bytes(data).decode()
    except UnicodeDecodeError:
        return None
    return bytes(data)


@SETTINGS
@given(body=st.text(), timestamp=TIMESTAMPS)
def test_stripe_verifies_any_body_and_timestamp(body: str, timestamp: int) -> None:
    secret = new_secret()
    header = stripe_signature(secret, timestamp, body)
    stripe.WebhookSignature.verify_header(body, header, secret, EVER)


@SETTINGS
@given(body=st.text(), timestamp=TIMESTAMPS, delivery_id=DELIVERY_IDS)
def test_standard_signature_matches_reference_for_any_timestamp(
    body: str, timestamp: int, delivery_id: str
) -> None:
    secret = new_secret()
    moment = datetime.fromtimestamp(timestamp, tz=UTC)
    expected = Webhook(secret).sign(delivery_id, moment, body)
    assert standard_signature(secret, delivery_id, timestamp, body) == expected


@SETTINGS
@given(body=JSON_BODIES, skew=NEAR_NOW, delivery_id=DELIVERY_IDS)
def test_standard_webhooks_verifies_any_body(body: str, skew: int, delivery_id: str) -> None:
    secret = new_secret()
    timestamp = int(time.time()) + skew
    headers = signature_headers(secret, delivery_id, "pass.issued", timestamp, body)
    Webhook(secret).verify(body, headers)


@SETTINGS
@given(
    body=JSON_BODIES,
    skew=NEAR_NOW,
    delivery_id=DELIVERY_IDS,
    position=st.integers(min_value=0, max_value=10_000),
    byte=st.integers(min_value=0, max_value=0x7F),
)
def test_any_single_byte_change_fails_both_verifiers(
    body: str, skew: int, delivery_id: str, position: int, byte: int
) -> None:
    changed = _mutated(body, position, byte)
    assume(changed is not None)
    assert changed is not None
    secret = new_secret()
    timestamp = int(time.time()) + skew
    headers = signature_headers(secret, delivery_id, "pass.issued", timestamp, body)
    with pytest.raises(stripe.SignatureVerificationError):
        stripe.WebhookSignature.verify_header(changed, headers["svc-signature"], secret, EVER)
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(changed, headers)


@SETTINGS
@given(
    body=JSON_BODIES,
    skew=NEAR_NOW,
    delivery_id=DELIVERY_IDS,
    count=st.integers(min_value=1, max_value=11),
)
def test_every_live_secret_verifies_with_both_verifiers(
    body: str, skew: int, delivery_id: str, count: int
) -> None:
    secrets = [new_secret() for _ in range(count)]
    timestamp = int(time.time()) + skew
    headers = signature_headers(secrets, delivery_id, "pass.issued", timestamp, body)
    for secret in secrets:
        stripe.WebhookSignature.verify_header(body, headers["svc-signature"], secret, EVER)
        Webhook(secret).verify(body, headers)
