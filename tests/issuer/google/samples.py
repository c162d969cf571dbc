"""Sample templates and passes for the Google Wallet tests, built with the code under test."""

from typing import Any

from services.issuer.google.identity import GoogleIdentity
from services.issuer.google.objects import build_class, build_object
from shared.design import Design

TEMPLATE_ID = "tmpl_0Mx3AbCdEfGhIjKlMnOpQr"
PASS_ID = "pass_0Mx3ZyXwVuTsRqPoNmLkJi"
SERIAL = "1b4e28ba-2fa1-11d2-883f-0060b03c0c01"
SHORT_ID = "K7Q2ZP"
LOGO_URL = "https://tessera.example.com/v1/templates/tmpl_0Mx3AbCdEfGhIjKlMnOpQr/logo.png"
PLACEHOLDER_LOGO_URL = "https://tessera.example.com/static/google-wallet-logo.png"
CALLBACK_URL = "https://wallet.tessera.example.com/google/callbacks"
TEMPLATE_TYPES = ("event", "membership", "coupon", "loyalty", "generic")


def make_design(**overrides: Any) -> Design:
    """A design using every attribute the Google mapping reads."""
    document: dict[str, Any] = {
        "organization_name": "Acme Events",
        "description": "Summer Festival 2026",
        "logo_text": "Acme",
        "colors": {"background": "#1a2b3c", "foreground": "#FFFFFF", "label": "#CCCCCC"},
        "fields": [
            {"key": "seat", "label": "Seat", "slot": "primary"},
            {"key": "gate", "label": "Gate", "slot": "secondary", "default": "B"},
            {"key": "notes", "label": "Notes", "slot": "back"},
        ],
        "barcode": {
            "format": "qr",
            "message": "{serial_number}|{short_id}|{field_values.seat}",
            "alt_text": "Show at the gate",
        },
    }
    document.update(overrides)
    return Design.model_validate(document)


def sample_class(
    identity: GoogleIdentity,
    template_type: str,
    design: Design | None = None,
    *,
    logo_url: str | None = None,
    callback_url: str | None = None,
) -> dict[str, Any]:
    return build_class(
        identity=identity,
        template_id=TEMPLATE_ID,
        template_type=template_type,
        design=design or make_design(),
        logo_url=logo_url,
        placeholder_logo_url=PLACEHOLDER_LOGO_URL,
        callback_url=callback_url,
    )


def sample_object(
    identity: GoogleIdentity,
    template_type: str,
    design: Design | None = None,
    **overrides: Any,
) -> dict[str, Any]:
    arguments: dict[str, Any] = {
        "identity": identity,
        "template_id": TEMPLATE_ID,
        "template_type": template_type,
        "design": design or make_design(),
        "pass_id": PASS_ID,
        "serial_number": SERIAL,
        "short_id": SHORT_ID,
        "field_values": {"seat": "12A"},
        "holder_name": "Ada Lovelace",
        "holder_email": "ada@example.com",
        "voided": False,
    }
    arguments.update(overrides)
    return build_object(**arguments)
