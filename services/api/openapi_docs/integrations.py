"""The reference of what connects Tessera to other systems and devices: webhooks, scans,
scanner keys and Variant A's `POST /passes`."""

from services.api.openapi_docs import examples as ex
from services.api.openapi_docs.common import (
    CURSORS,
    IDEMPOTENT,
    SCANNER_KEYS,
    SCANS,
    VARIANT_A,
    WEBHOOKS,
    Doc,
    one,
)

OPERATIONS: dict[tuple[str, str], Doc] = {
    ("post", "/v1/webhooks"): Doc(
        WEBHOOKS,
        "Create a webhook",
        "Subscribes `url` to webhook event types (`pass.issued`, `pass.add_intent`, "
        "`pass.added_to_wallet`, `pass.update_pushed`, `pass.update_delivered`, `pass.removed`, "
        "`pass.voided`, `pass.redeemed`, or `*` for all). The answer holds the signing "
        "`secret`, shown only here: verify the `svc-signature` header of each delivery with it "
        "(docs/webhooks.md)." + IDEMPOTENT,
        request=one(ex.WEBHOOK_CREATE),
        response=one(ex.WEBHOOK_WITH_SECRET),
    ),
    ("get", "/v1/webhooks"): Doc(
        WEBHOOKS,
        "List webhooks",
        "Every webhook of this account and mode, without secrets.",
        response=one(ex.listed(ex.WEBHOOK)),
    ),
    ("get", "/v1/webhooks/{webhook_id}"): Doc(
        WEBHOOKS,
        "Retrieve a webhook",
        "A webhook without its secret, with its health: `failing_since`, "
        "`consecutive_failures`, and `disabled_reason` once Tessera disabled it.",
        response=one(ex.WEBHOOK),
    ),
    ("patch", "/v1/webhooks/{webhook_id}"): Doc(
        WEBHOOKS,
        "Update a webhook",
        "Changes the fields sent. `enabled: true` re-enables a webhook Tessera disabled and "
        "clears its failure record." + IDEMPOTENT,
        request=one(ex.WEBHOOK_UPDATE),
        response=one(ex.UPDATED_WEBHOOK),
    ),
    ("delete", "/v1/webhooks/{webhook_id}"): Doc(
        WEBHOOKS,
        "Delete a webhook",
        "Deletes the webhook and its delivery history for good.",
        response=one(ex.DELETED_WEBHOOK),
    ),
    ("post", "/v1/webhooks/{webhook_id}/rotate_secret"): Doc(
        WEBHOOKS,
        "Rotate a webhook's secret",
        "Makes a new signing secret, shown only in this answer. The replaced one keeps signing "
        "(both signatures are sent) for `grace_period_seconds` (default 86400; 0 stops it at "
        "once, for a leaked secret)." + IDEMPOTENT,
        request=one(ex.ROTATE),
        response=one(ex.ROTATED_WEBHOOK),
    ),
    ("get", "/v1/webhooks/{webhook_id}/deliveries"): Doc(
        WEBHOOKS,
        "List a webhook's deliveries",
        "Its deliveries with their attempts and the endpoint's answers, 100 by default, "
        "filtered by `status` and `event_type`." + CURSORS,
        response=one(ex.listed(ex.DELIVERY)),
    ),
    ("post", "/v1/webhooks/{webhook_id}/deliveries/{delivery_id}/resend"): Doc(
        WEBHOOKS,
        "Resend a delivery",
        "Asks for one more attempt of the delivery now, whatever its status, and answers the "
        'delivery as it is (the attempt follows, `trigger: "manual"`). A disabled webhook '
        "answers 400 `webhook_disabled`. No request body.",
        response=one(ex.RESENT_DELIVERY),
    ),
    ("post", "/v1/webhooks/{webhook_id}/recover"): Doc(
        WEBHOOKS,
        "Recover failed deliveries",
        "Re-queues for one attempt each the `failed` and `dead` deliveries of the webhook "
        "created in `[since, until)` (`until` null: now), for example an outage's range once "
        "the endpoint is fixed.",
        request=one(ex.RECOVER),
        response=one(ex.RECOVERY),
    ),
    ("post", "/v1/scans"): Doc(
        SCANS,
        "Scan a pass",
        "Decides a scan by the template's redemption policy and records it: `code` (the "
        "barcode message read) or `pass_id`. Every decision answers 200: `accepted`, or "
        "`rejected` with a `reason` (`unknown_code`, `wrong_mode`, `voided`, `not_yet_valid`, "
        "`expired`, `already_redeemed`). An accepted scan records a `redeemed` event "
        "(`pass.redeemed`); concurrent scans never pass `max_redemptions`. Scanner keys may "
        "call this and nothing else." + IDEMPOTENT,
        request={
            "code": ("By the barcode message", ex.SCAN_BY_CODE),
            "pass_id": ("By pass id", ex.SCAN_BY_PASS),
        },
        response={
            "accepted": ("Accepted", ex.SCAN),
            "rejected": ("A second scan of a single-use ticket", ex.REJECTED_SCAN),
        },
    ),
    ("get", "/v1/scans"): Doc(
        SCANS,
        "List scans",
        "Every scan decided, accepted or rejected, filtered by `pass_id` and `result`." + CURSORS,
        response=one(ex.listed(ex.REJECTED_SCAN, ex.SCAN)),
    ),
    ("get", "/v1/passes/{pass_id}/scans"): Doc(
        SCANS,
        "List a pass's scans",
        "The scans of one pass; 404 for an unknown pass." + CURSORS,
        response=one(ex.listed(ex.SCAN)),
    ),
    ("post", "/v1/scanner_keys"): Doc(
        SCANNER_KEYS,
        "Create a scanner key",
        "A key for a staff device (`svc_scan_test_...` or `svc_scan_live_...`, the mode of the "
        "key that made it) that may call `POST /v1/scans` and nothing else. The key is shown "
        "only in this answer. Needs the account's own API key.",
        request=one(ex.SCANNER_KEY_CREATE),
        response=one(ex.SCANNER_KEY_CREATED),
    ),
    ("get", "/v1/scanner_keys"): Doc(
        SCANNER_KEYS,
        "List scanner keys",
        "Every scanner key of this account and mode, newest first, revoked ones included, "
        "never the keys themselves.",
        response=one(ex.listed(ex.SCANNER_KEY)),
    ),
    ("delete", "/v1/scanner_keys/{key_id}"): Doc(
        SCANNER_KEYS,
        "Revoke a scanner key",
        "The key is refused from the next request on, on every api replica; it stays in the "
        "list with `revoked: true`.",
        response=one(ex.REVOKED_SCANNER_KEY),
    ),
    ("post", "/passes"): Doc(
        VARIANT_A,
        "Create a pass (Variant A 1.0.0)",
        "**Variant A, version 1.0.0**: the spec's machine-readable pass creation. Authenticate "
        "with the `x-api-key` header (the same `svc_test_`/`svc_live_` keys). The keys of "
        "`data` are matched against the template's field keys (numbers and booleans become "
        "their JSON text, `null` keeps the default); `holderName`, `holderEmail` and `metadata` "
        "are understood too; any other key answers 400. Answers 201 with the `.pkpass` URL "
        '(`apple`) and the Google Wallet save link (`google`); errors are `{"message"}`. '
        "No `Idempotency-Key`: use `POST /v1/passes` where retries must be safe.",
        request=one(ex.VARIANT_A_CREATE),
        response=one(ex.VARIANT_A_CREATED),
    ),
}
