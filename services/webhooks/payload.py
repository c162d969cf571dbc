"""The body of a delivery (spec 6.3), serialized once when the delivery is created.

The stored string is exactly what every attempt sends and signs, so a retry carries the same
bytes as the first attempt.
"""

import json
from typing import Any

from shared.clock import iso
from shared.messages import PassEventMessage


def payload(event: PassEventMessage, webhook_type: str) -> dict[str, Any]:
    snapshot = event.pass_snapshot
    return {
        "id": event.id,
        "type": webhook_type,
        "created_at": iso(event.created_at),
        "data": {
            "pass": {
                "id": snapshot.id,
                "short_id": snapshot.short_id,
                "mode": snapshot.mode,
                "holder_email": snapshot.holder_email,
                "holder_name": snapshot.holder_name,
                "field_values": snapshot.field_values,
                "voided": snapshot.voided,
            },
            "event": {"type": event.event_type, "metadata": event.metadata},
        },
    }


def body(event: PassEventMessage, webhook_type: str) -> str:
    """Compact JSON, ASCII only (non-ASCII characters escaped), so the bytes on the wire and
    the string a receiver verifies can never differ by an encoding."""
    return compact_json(payload(event, webhook_type))


def compact_json(value: dict[str, Any]) -> str:
    return json.dumps(value, separators=(",", ":"))
