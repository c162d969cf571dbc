"""A poster event ticket design (the design's `event` block, docs/templates.md#event), shared
by the pass.json, .pkpass and Google Wallet tests."""

from typing import Any

from services.issuer.content import PassContent
from shared.design import Design
from tests.issuer.pkpass_samples import WEB_SERVICE_URL, all_scales, b64, content, png

EVENT: dict[str, Any] = {
    "name": "Spring Tour",
    "type": "live_performance",
    "starts_at": "2031-06-01T20:00:00+02:00",
    "ends_at": "2031-06-01T23:00:00+02:00",
    "doors_open_at": "2031-06-01T18:30:00+02:00",
    "venue": {
        "name": "Arena",
        "address": "1 Main Street\n30100 Venice",
        "region": "Venice, Italy",
        "room": "Main Stage",
        "latitude": 45.4408,
        "longitude": 12.3155,
        "phone_number": "+39 041 000 000",
        "email": "box-office@example.com",
        "website": "https://arena.example.com",
    },
    "performers": ["The Band", "Support Act"],
    "seat_fields": {"section": "section", "row": "row", "number": "seat", "gate": "gate"},
    "poster": True,
    "logo_text": "Acme Live",
    "links": {
        "accessibility": "https://arena.example.com/access",
        "add_on": "https://acme.example.com/upgrade",
        "bag_policy": "https://arena.example.com/bags",
        "directions": "https://arena.example.com/directions",
        "merchandise": "https://acme.example.com/shop",
        "order_food": "https://arena.example.com/food",
        "parking_information": "https://arena.example.com/parking",
        "purchase_parking": "https://arena.example.com/parking/buy",
        "sell": "https://acme.example.com/sell",
        "transfer": "https://acme.example.com/transfer",
        "transit_information": "https://arena.example.com/transit",
    },
}
# Every links key and venue contact, as Apple's pass.json names it.
APPLE_EXTRA_KEYS: dict[str, str] = {
    "accessibilityURL": "https://arena.example.com/access",
    "addOnURL": "https://acme.example.com/upgrade",
    "bagPolicyURL": "https://arena.example.com/bags",
    "directionsInformationURL": "https://arena.example.com/directions",
    "merchandiseURL": "https://acme.example.com/shop",
    "orderFoodURL": "https://arena.example.com/food",
    "parkingInformationURL": "https://arena.example.com/parking",
    "purchaseParkingURL": "https://arena.example.com/parking/buy",
    "sellURL": "https://acme.example.com/sell",
    "transferURL": "https://acme.example.com/transfer",
    "transitInformationURL": "https://arena.example.com/transit",
    "contactVenueEmail": "box-office@example.com",
    "contactVenuePhoneNumber": "+39 041 000 000",
    "contactVenueWebsite": "https://arena.example.com",
    "eventLogoText": "Acme Live",
}


def poster_design(**overrides: Any) -> dict[str, Any]:
    """An eventTicket design with the poster event block, its artwork and a Google logo."""
    design: dict[str, Any] = {
        "organization_name": "Acme Live",
        "description": "Concert ticket",
        "colors": {"background": "#1A1A2E", "foreground": "#FFFFFF", "label": "#E94560"},
        "fields": [
            {"key": "seat", "label": "Seat", "slot": "primary"},
            {"key": "section", "label": "Section", "slot": "secondary", "default": "B"},
            {"key": "row", "label": "Row", "slot": "secondary"},
            {"key": "gate", "label": "Gate", "slot": "auxiliary", "default": "G2"},
        ],
        "barcode": {"format": "qr", "message": "{serial_number}"},
        "images": {
            "icon": all_scales("icon"),
            "logo": all_scales("logo"),
            "artwork": {
                f"x{scale}": b64(png(375 * scale, 500 * scale, (20 * scale, 40, 90)))
                for scale in (1, 2)
            },
        },
        "localizations": {"fr": {"Spring Tour": "Tournée de printemps", "Arena": "Arène"}},
        "google_logo": b64(png(660, 660)),
        "event": EVENT,
    }
    design.update(overrides)
    return design


def poster_content(**overrides: Any) -> PassContent:
    """A pass of the poster design: its seat values, a holder, a web service."""
    values: dict[str, Any] = {
        "apple_style": "eventTicket",
        "field_values": {"seat": "12", "row": "F"},
        "holder_name": "Ada Lovelace",
        "web_service_url": WEB_SERVICE_URL,
    }
    values.update(overrides)
    return content(Design.model_validate(poster_design()), **values)
