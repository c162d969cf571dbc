"""Stored records built in memory, for unit tests of code that reads them (no database)."""

from datetime import UTC, datetime
from typing import Any

from shared.models import PassRecord, TemplateRecord

DESIGN: dict[str, Any] = {
    "organization_name": "Acme Live",
    "description": "Concert ticket",
    "logo_text": "Acme",
    "colors": {"background": "#12233A", "foreground": "#FFFFFF", "label": "#9FC3FF"},
    "fields": [
        {"key": "venue", "label": "Venue", "slot": "header", "default": "Hall A"},
        {"key": "seat", "label": "Seat", "slot": "primary", "default": "GA"},
        {"key": "gate", "label": "Gate", "slot": "secondary"},
        {"key": "row", "label": "Row", "slot": "auxiliary", "default": "12"},
        {"key": "terms", "label": "Terms", "slot": "back", "default": "No refunds"},
    ],
}


def template_record(**overrides: Any) -> TemplateRecord:
    now = datetime.now(UTC)
    fields: dict[str, Any] = {
        "_id": "tmpl_test",
        "account_id": "acct_test",
        "mode": "test",
        "created_at": now,
        "updated_at": now,
        "name": "Concert",
        "type": "event",
        "apple_style": "eventTicket",
        "design": DESIGN,
    }
    return TemplateRecord.model_validate(fields | overrides)


def pass_record(**overrides: Any) -> PassRecord:
    now = datetime.now(UTC)
    fields: dict[str, Any] = {
        "_id": "pass_test",
        "account_id": "acct_test",
        "mode": "test",
        "created_at": now,
        "updated_at": now,
        "short_id": "AbCdEfGh12345678",
        "template_id": "tmpl_test",
        "serial_number": "serial-1",
        "authentication_token": "token",
        "holder_name": "Ada Lovelace",
        "field_values": {"seat": "C3"},
        "google_save_url": "https://pay.google.com/gp/v/save/abc",
    }
    return PassRecord.model_validate(fields | overrides)
