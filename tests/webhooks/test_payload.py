"""The delivery body is exactly spec 6.3's shape, with millisecond UTC timestamps."""

import json
from datetime import UTC, datetime, timedelta, timezone

from services.webhooks import payload
from shared.messages import PassEventMessage
from shared.models import PassSnapshot


def event(**overrides: object) -> PassEventMessage:
    fields: dict[str, object] = {
        "id": "psEvnt_0LwQ5oT2aJ1nKc8rFq3VbZ",
        "account_id": "acct_x",
        "mode": "live",
        "pass_id": "pass_1",
        "event_type": "downloaded",
        "metadata": {"wallet": "google"},
        "created_at": datetime(2024, 2, 29, 23, 59, 59, 987654, tzinfo=UTC),
        "pass_snapshot": PassSnapshot(
            id="pass_1",
            short_id="abc",
            mode="live",
            holder_email=None,
            holder_name="Zoë",
            field_values={"seat": "A1"},
            voided=True,
        ),
    }
    return PassEventMessage.model_validate(fields | overrides)


def test_the_body_has_the_spec_fields_and_nothing_else() -> None:
    body = json.loads(payload.body(event(), "pass.add_intent"))
    assert body == {
        "id": "psEvnt_0LwQ5oT2aJ1nKc8rFq3VbZ",
        "type": "pass.add_intent",
        "created_at": "2024-02-29T23:59:59.987Z",
        "data": {
            "pass": {
                "id": "pass_1",
                "short_id": "abc",
                "mode": "live",
                "holder_email": None,
                "holder_name": "Zoë",
                "field_values": {"seat": "A1"},
                "voided": True,
            },
            "event": {"type": "downloaded", "metadata": {"wallet": "google"}},
        },
    }


def test_the_body_is_compact_ascii_and_created_at_is_utc_with_milliseconds() -> None:
    paris = timezone(timedelta(hours=1))
    text = payload.body(event(created_at=datetime(2024, 1, 1, 1, 0, 0, tzinfo=paris)), "x")
    assert text.isascii()
    assert ": " not in text
    assert ", " not in text
    assert '"holder_name":"Zo\\u00eb"' in text
    assert json.loads(text)["created_at"] == "2024-01-01T00:00:00.000Z"
