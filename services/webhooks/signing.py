"""Signing a delivery: `svc-signature` (Stripe's scheme) and the Standard Webhooks headers.

- `svc-signature: t=<unix seconds>,v1=<hex>` where hex is HMAC-SHA256 with the whole secret
  (`whsec_...`, UTF-8) as the key over `"<t>.<body>"`: what stripe's verifiers check.
- `webhook-id`, `webhook-timestamp`, `webhook-signature: v1,<base64>` (standardwebhooks.com):
  HMAC-SHA256 over `"<webhook-id>.<t>.<body>"` with the key that the secret's part after
  `whsec_` encodes in standard base64. `webhook-id` is the delivery id (`whd_...`): the same
  on every attempt of one delivery, different for each webhook an event goes to.

Every attempt is signed afresh with its own timestamp, so receivers can refuse old ones.
"""

import base64
import hashlib
import hmac

from shared.ids import PREFIXES

SECRET_PREFIX = PREFIXES["webhook_secret"] + "_"


def stripe_signature(secret: str, timestamp: int, body: str) -> str:
    """The `svc-signature` header value."""
    digest = hmac.new(secret.encode(), f"{timestamp}.{body}".encode(), hashlib.sha256)
    return f"t={timestamp},v1={digest.hexdigest()}"


def standard_key(secret: str) -> bytes:
    """The Standard Webhooks key: the base64 after `whsec_`, decoded as their libraries do."""
    encoded = secret.removeprefix(SECRET_PREFIX)
    # Like the reference library: tolerate missing padding (b64decode ignores the extra).
    return base64.b64decode(encoded + "==")


def standard_signature(secret: str, message_id: str, timestamp: int, body: str) -> str:
    """The `webhook-signature` header value."""
    signed = f"{message_id}.{timestamp}.{body}".encode()
    digest = hmac.new(standard_key(secret), signed, hashlib.sha256).digest()
    return f"v1,{base64.b64encode(digest).decode()}"


def signature_headers(
    secret: str, delivery_id: str, event_type: str, timestamp: int, body: str
) -> dict[str, str]:
    """Every header an attempt carries besides Content-Type and User-Agent."""
    return {
        "svc-signature": stripe_signature(secret, timestamp, body),
        "svc-event-type": event_type,
        "webhook-id": delivery_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": standard_signature(secret, delivery_id, timestamp, body),
    }
