"""Signing a delivery: `svc-signature` (Stripe's scheme) and the Standard Webhooks headers.

- `svc-signature: t=<unix seconds>,v1=<hex>` where hex is HMAC-SHA256 with the whole secret
  (`whsec_...`, UTF-8) as the key over `"<t>.<body>"`: what stripe's verifiers check.
- `webhook-id`, `webhook-timestamp`, `webhook-signature: v1,<base64>` (standardwebhooks.com):
  HMAC-SHA256 over `"<webhook-id>.<t>.<body>"` with the key that the secret's part after
  `whsec_` encodes in standard base64. `webhook-id` is the delivery id (`whd_...`): the same
  on every attempt of one delivery, different for each webhook an event goes to.

Every attempt is signed afresh with its own timestamp, so receivers can refuse old ones.

During a rotation's grace period an attempt is signed with every live secret, the current one
first (docs/webhooks.md#secret-rotation): `svc-signature: t=<t>,v1=<new>,v1=<old>` (stripe's
verifiers accept any matching `v1`) and `webhook-signature: v1,<new> v1,<old>` (the Standard
Webhooks header is a space-separated list).
"""

import base64
import hashlib
import hmac
from collections.abc import Callable, Sequence

from shared.ids import PREFIXES

SECRET_PREFIX = PREFIXES["webhook_secret"] + "_"


def _digests(secrets: Sequence[str], signed: str, key: Callable[[str], bytes]) -> list[bytes]:
    return [hmac.new(key(secret), signed.encode(), hashlib.sha256).digest() for secret in secrets]


def _listed(secrets: str | Sequence[str]) -> Sequence[str]:
    """One secret or several; a str is a Sequence[str] too, so it is told apart first."""
    listed = [secrets] if isinstance(secrets, str) else secrets
    if not listed:
        raise ValueError("signing needs at least one secret")
    return listed


def stripe_signature(secrets: str | Sequence[str], timestamp: int, body: str) -> str:
    """The `svc-signature` header value: one `v1` per secret, in the order given."""
    digests = _digests(_listed(secrets), f"{timestamp}.{body}", str.encode)
    return ",".join([f"t={timestamp}", *(f"v1={digest.hex()}" for digest in digests)])


def standard_key(secret: str) -> bytes:
    """The Standard Webhooks key: the base64 after `whsec_`, decoded as their libraries do."""
    encoded = secret.removeprefix(SECRET_PREFIX)
    # Like the reference library: tolerate missing padding (b64decode ignores the extra).
    return base64.b64decode(encoded + "==")


def standard_signature(
    secrets: str | Sequence[str], message_id: str, timestamp: int, body: str
) -> str:
    """The `webhook-signature` header value: one `v1,<base64>` per secret, space-separated."""
    signed = f"{message_id}.{timestamp}.{body}"
    digests = _digests(_listed(secrets), signed, standard_key)
    return " ".join(f"v1,{base64.b64encode(digest).decode()}" for digest in digests)


def signature_headers(
    secrets: str | Sequence[str], delivery_id: str, event_type: str, timestamp: int, body: str
) -> dict[str, str]:
    """Every header an attempt carries besides Content-Type and User-Agent, signed with each of
    `secrets` (one secret, or the live ones current first: services/webhooks/rotation.py)."""
    return {
        "svc-signature": stripe_signature(secrets, timestamp, body),
        "svc-event-type": event_type,
        "webhook-id": delivery_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": standard_signature(secrets, delivery_id, timestamp, body),
    }
