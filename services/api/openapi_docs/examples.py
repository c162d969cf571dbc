"""Example requests and answers of the public OpenAPI document.

They follow the README's walk-through (a "Summer Concert" template, Ada Lovelace's ticket on
the stack of `make run`) and the shapes in docs/*.md, and tests/api/test_openapi_docs.py checks
each against the schema it illustrates. Ids have the right prefix and length; secrets are
made up.
"""

import functools
from typing import Any

from shared.design import Design

SITE = "http://127.0.0.1:8000"
TEMPLATE_ID = "tmpl_033XihluIA4vr3tVtDr4DW"
TICKET_ID = "pass_033XijIF3BaOH3rZOKsOfR"
OTHER_TICKET_ID = "pass_033XikoZsd7YaCvUC4UI8c"
SHORT_ID = "spADc6Jl8vKWAcSm"
OTHER_SHORT_ID = "YJUQJCqueVPArCL8"
WEBHOOK_ID = "whk_033XiqtvAEQgCykwK2qGJ1"
DELIVERY_ID = "whd_033XisQFshZqNsk1EnSpTg"
JOB_ID = "job_033Xitwajd37h1QOkQkBVe"
SCAN_ID = "scan_033XivSvXrcMKpOV7QD5m1"
SCANNER_KEY_ID = "skey_033XiwzGMJ2j2XzGWerl9Z"
BUNDLE_ID = "pbdl_033XiyVbATTYQbU3iMySKw"
CREATED = "2026-06-13T14:51:00.000Z"
UPDATED = "2026-06-13T15:02:41.318Z"
PAGE_URL = f"{SITE}/p/{SHORT_ID}"
EMAIL_ERROR = (
    "Invalid holder_email: value is not a valid email address: An email address must have an "
    "@-sign."
)
DOWNLOAD_URL = f"{PAGE_URL}/pass.pkpass"
GOOGLE_SAVE_URL = "https://pay.google.com/gp/v/save/eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.eyJ..."

TEMPLATE_CREATE: dict[str, Any] = {
    "name": "Summer Concert",
    "type": "event",
    "apple_style": "eventTicket",
    "design": {
        "organization_name": "Acme Live",
        "description": "Summer Concert ticket",
        "colors": {"background": "#1E3A8A", "foreground": "#FFFFFF", "label": "#BFDBFE"},
        "fields": [
            {"key": "event", "label": "Event", "slot": "primary", "default": "Summer Concert"},
            {"key": "seat", "label": "Seat", "slot": "secondary"},
            {"key": "gate", "label": "Gate", "slot": "auxiliary", "default": "A"},
        ],
        "barcode": {"format": "qr", "message": "{serial_number}"},
    },
}
TEMPLATE_UPDATE: dict[str, Any] = {"name": "Summer Concert 2026", "require_download_link": True}
REDEMPTION = {
    "max_redemptions": 1,
    "valid_from": None,
    "valid_until": None,
    "on_limit": "mark_used",
}


@functools.cache
def template() -> dict[str, Any]:
    """The template TEMPLATE_CREATE makes: its design as stored, every default filled in."""
    design = Design.model_validate(TEMPLATE_CREATE["design"]).model_dump(mode="json")
    return {
        "id": TEMPLATE_ID,
        "object": "template",
        "name": "Summer Concert",
        "type": "event",
        "apple_style": "eventTicket",
        "design": design,
        "archived": False,
        "require_download_link": False,
        "design_version": 1,
        "rollout_job_id": None,
        "redemption": REDEMPTION,
        "created_at": "2026-06-13T14:50:00.000Z",
        "updated_at": "2026-06-13T14:50:00.000Z",
    }


def updated_template() -> dict[str, Any]:
    return {**template(), **TEMPLATE_UPDATE, "updated_at": UPDATED}


def template_list() -> dict[str, Any]:
    return listed(template())


PASS_CREATE: dict[str, Any] = {
    "template_id": TEMPLATE_ID,
    "holder_name": "Ada Lovelace",
    "holder_email": "ada@example.com",
    "field_values": {"seat": "F12"},
    "metadata": {"order_id": "order-1001"},
}
PASS: dict[str, Any] = {
    "id": TICKET_ID,
    "object": "pass",
    "short_id": SHORT_ID,
    "template_id": TEMPLATE_ID,
    "serial_number": "6f1c2a8e-3b7d-4e52-9a0c-5d8e7f6a1b2c",
    "mode": "test",
    "holder_email": "ada@example.com",
    "holder_name": "Ada Lovelace",
    "field_values": {"seat": "F12"},
    "voided": False,
    "voided_at": None,
    "metadata": {"order_id": "order-1001"},
    "created_via_api": True,
    "design_version": 1,
    "redemption_count": 0,
    "last_redeemed_at": None,
    "redemptions_remaining": 1,
    "google_status": None,
    "url": PAGE_URL,
    "download_url": DOWNLOAD_URL,
    "google_save_url": f"{PAGE_URL}/google",
    "created_at": CREATED,
}
PASS_UPDATE: dict[str, Any] = {"field_values": {"seat": "F14"}}
UPDATED_PASS = {**PASS, "field_values": {"seat": "F14"}}
VOIDED_PASS = {**PASS, "voided": True, "voided_at": UPDATED}
REDACTED_PASS = {
    **VOIDED_PASS,
    "holder_email": None,
    "holder_name": None,
    "field_values": {},
    "metadata": {},
}
DELETED_TEMPLATE = {"id": TEMPLATE_ID, "deleted": True}
DELETED_WEBHOOK = {"id": WEBHOOK_ID, "deleted": True}

BATCH_CREATE: dict[str, Any] = {
    "passes": [
        {
            "template_id": TEMPLATE_ID,
            "holder_name": "Ada Lovelace",
            "field_values": {"seat": "F12"},
        },
        {
            "template_id": TEMPLATE_ID,
            "holder_name": "Charles Babbage",
            "field_values": {"shoe": "9"},
        },
    ],
    "bundle": False,
}
BATCH: dict[str, Any] = {
    "object": "batch",
    "data": [
        {"index": 0, "status": 201, "pass": PASS},
        {
            "index": 1,
            "status": 400,
            "error": {
                "type": "invalid_request_error",
                "code": "parameter_unknown",
                "message": "Unknown field 'shoe': the template defines ['event', 'gate', 'seat'].",
                "param": "field_values.shoe",
            },
        },
    ],
    "bundle": None,
}

EVENTS: dict[str, Any] = {
    "object": "list",
    "data": [
        {
            "id": "psEvnt_033XinrFUbPSjHL0im2Xtv",
            "object": "pass_event",
            "pass_id": TICKET_ID,
            "type": "updated",
            "metadata": {
                "stage": "pushed",
                "field_values": ["seat"],
                "metadata": [],
                "devices_pushed": 0,
                "push_failures": 0,
                "devices_unregistered": 0,
            },
            "created_at": UPDATED,
        },
        {
            "id": "psEvnt_033XimKujA6OpitJf3qvmU",
            "object": "pass_event",
            "pass_id": TICKET_ID,
            "type": "created",
            "metadata": {},
            "created_at": CREATED,
        },
    ],
    "has_more": False,
}

DOWNLOAD_LINK_CREATE = {"expires_in": 3600}
DOWNLOAD_LINK = {
    "object": "pass.download_link",
    "pass_id": TICKET_ID,
    "url": f"{SITE}/l/pdl_Eu6NF_lGszr5qCUZod-d2k_EsH46O8hx",
    "expires_in": 3600,
    "expires_at": "2026-06-13T16:02:41.318Z",
    "created_at": UPDATED,
}

BUNDLE_CREATE = {"pass_ids": [TICKET_ID, OTHER_TICKET_ID]}
BUNDLE = {
    "id": BUNDLE_ID,
    "object": "pass_bundle",
    "pass_ids": [TICKET_ID, OTHER_TICKET_ID],
    "url": f"{SITE}/b/{BUNDLE_ID}",
    "download_url": f"{SITE}/b/{BUNDLE_ID}.pkpasses",
    "created_at": UPDATED,
}

IMPORT_JOB_CREATE: dict[str, Any] = {
    "type": "import_passes",
    "template_id": TEMPLATE_ID,
    "rows": [
        {
            "holder_name": "Ada Lovelace",
            "holder_email": "ada@example.com",
            "field_values": {"seat": "F12"},
        },
        {"holder_name": "Charles Babbage", "field_values": {"seat": "F13"}},
    ],
}
UPDATE_JOB_CREATE: dict[str, Any] = {
    "type": "update_passes",
    "template_id": TEMPLATE_ID,
    "field_values": {"gate": "C"},
}
JOB: dict[str, Any] = {
    "id": JOB_ID,
    "object": "job",
    "type": "import_passes",
    "status": "queued",
    "template_id": TEMPLATE_ID,
    "total": 2,
    "processed": 0,
    "succeeded": 0,
    "failed": 0,
    "errors": [],
    "created_at": UPDATED,
    "started_at": None,
    "finished_at": None,
}
FINISHED_JOB: dict[str, Any] = {
    **JOB,
    "status": "succeeded",
    "total": 3,
    "processed": 3,
    "succeeded": 2,
    "failed": 1,
    "errors": [
        {
            "row": 3,
            "error": {
                "type": "invalid_request_error",
                "code": "parameter_invalid",
                "message": EMAIL_ERROR,
                "param": "holder_email",
            },
        }
    ],
    "started_at": "2026-06-13T15:02:41.502Z",
    "finished_at": "2026-06-13T15:02:42.118Z",
}
CANCELED_JOB = {**JOB, "status": "canceled", "finished_at": "2026-06-13T15:02:42.118Z"}
CSV_IMPORT = (
    "holder_name,holder_email,seat,metadata.order\n"
    "Ada Lovelace,ada@example.com,F12,1001\n"
    "Charles Babbage,,F13,1002\n"
)
RESULTS_NDJSON = (
    f'{{"row":1,"status":201,"pass_id":"{TICKET_ID}","url":"{PAGE_URL}",'
    f'"download_url":"{DOWNLOAD_URL}"}}\n'
    '{"row":3,"status":400,"error":{"type":"invalid_request_error","code":"parameter_invalid",'
    f'"message":"{EMAIL_ERROR}","param":"holder_email"}}}}\n'
)
RESULTS_CSV = (
    "row,status,pass_id,url,download_url,error_type,error_code,error_message,error_param\r\n"
    f"1,201,{TICKET_ID},{PAGE_URL},{DOWNLOAD_URL},,,,\r\n"
    "3,400,,,,invalid_request_error,parameter_invalid,"
    f"{EMAIL_ERROR},holder_email\r\n"
)

WEBHOOK_CREATE: dict[str, Any] = {
    "url": "https://example.com/hooks/tessera",
    "events": ["pass.issued", "pass.added_to_wallet", "pass.voided"],
    "description": "Order system",
    "enabled": True,
    "max_deliveries_per_second": None,
}
WEBHOOK: dict[str, Any] = {
    "id": WEBHOOK_ID,
    "object": "webhook",
    "url": "https://example.com/hooks/tessera",
    "events": ["pass.issued", "pass.added_to_wallet", "pass.voided"],
    "description": "Order system",
    "enabled": True,
    "disabled_reason": None,
    "disabled_at": None,
    "failing_since": None,
    "consecutive_failures": 0,
    "max_deliveries_per_second": None,
    "created_at": CREATED,
}
WEBHOOK_WITH_SECRET = {**WEBHOOK, "secret": "whsec_Nfq9Goc9VZ5L2Oq0Y4d3T1OKEU4TF5ls"}
WEBHOOK_UPDATE = {"events": ["*"], "max_deliveries_per_second": 20}
UPDATED_WEBHOOK = {**WEBHOOK, **WEBHOOK_UPDATE}
ROTATE = {"grace_period_seconds": 86400}
ROTATED_WEBHOOK = {**WEBHOOK, "secret": "whsec_sACatDr9tb7y-E-amd69Aa-46WTf5Beb"}
DELIVERY: dict[str, Any] = {
    "id": DELIVERY_ID,
    "object": "webhook_delivery",
    "webhook_id": WEBHOOK_ID,
    "event_type": "pass.issued",
    "status": "failed",
    "attempts": 2,
    "last_attempt_at": "2026-06-13T14:51:30.412Z",
    "next_attempt_at": "2026-06-13T14:56:30.412Z",
    "response_status": 503,
    "response_body": "Service Unavailable",
    "trigger": "scheduled",
    "created_at": CREATED,
}
RESENT_DELIVERY = {**DELIVERY, "trigger": "manual"}
RECOVER = {"since": "2026-06-13T14:00:00Z", "until": "2026-06-13T15:00:00Z"}
RECOVERY = {
    "object": "webhook_recovery",
    "webhook_id": WEBHOOK_ID,
    "since": "2026-06-13T14:00:00.000Z",
    "until": "2026-06-13T15:00:00.000Z",
    "requeued": 42,
    "created_at": UPDATED,
}

SCAN_BY_CODE = {"code": "6f1c2a8e-3b7d-4e52-9a0c-5d8e7f6a1b2c", "location": "North gate"}
SCAN_BY_PASS = {"pass_id": TICKET_ID, "location": "Box office", "metadata": {"staff": "Grace"}}
SCAN: dict[str, Any] = {
    "id": SCAN_ID,
    "object": "scan",
    "result": "accepted",
    "reason": None,
    "pass_id": TICKET_ID,
    "code": SCAN_BY_CODE["code"],
    "redemption_count": 1,
    "redemptions_remaining": 0,
    "location": "North gate",
    "metadata": {},
    "created_at": UPDATED,
    "pass": {
        "id": TICKET_ID,
        "holder_name": "Ada Lovelace",
        "template_id": TEMPLATE_ID,
        "field_values": {"seat": "F12"},
    },
}
REJECTED_SCAN = {
    **SCAN,
    "result": "rejected",
    "reason": "already_redeemed",
    "created_at": "2026-06-13T15:03:05.771Z",
}

SCANNER_KEY_CREATE = {"name": "North gate"}
SCANNER_KEY: dict[str, Any] = {
    "id": SCANNER_KEY_ID,
    "object": "scanner_key",
    "name": "North gate",
    "mode": "test",
    "revoked": False,
    "revoked_at": None,
    "created_at": CREATED,
}
SCANNER_KEY_CREATED = {**SCANNER_KEY, "key": "svc_scan_test_Eu6NF_lGszr5qCUZod-d2k_EsH46O8hx"}
REVOKED_SCANNER_KEY = {**SCANNER_KEY, "revoked": True, "revoked_at": UPDATED}

VARIANT_A_CREATE: dict[str, Any] = {
    "templateId": TEMPLATE_ID,
    "data": {"seat": "F12", "holderName": "Ada Lovelace", "holderEmail": "ada@example.com"},
}
VARIANT_A_CREATED = {"apple": DOWNLOAD_URL, "google": GOOGLE_SAVE_URL}


def listed(*objects: Any, has_more: bool = False) -> dict[str, Any]:
    """The list envelope of `objects`."""
    return {"object": "list", "data": list(objects), "has_more": has_more}
