"""The reference of the v1 resources: templates, passes, pass bundles, jobs and events."""

from services.api.openapi_docs import examples as ex
from services.api.openapi_docs.common import (
    BUNDLES,
    CURSORS,
    EVENTS,
    IDEMPOTENT,
    JOBS,
    PASSES,
    TEMPLATES,
    Doc,
    one,
)

OPERATIONS: dict[tuple[str, str], Doc] = {
    ("post", "/v1/templates"): Doc(
        TEMPLATES,
        "Create a template",
        "A template fixes the design (`design`: colors, fields and their slots, barcode, images, "
        "dates, locations, the event) and the redemption policy of every pass issued from it. "
        "The `design` object is described in docs/templates.md; the answer returns it with every "
        "default filled in." + IDEMPOTENT,
        request=one(ex.TEMPLATE_CREATE, "The README's concert ticket"),
        response=one(ex.template()),
    ),
    ("get", "/v1/templates"): Doc(
        TEMPLATES,
        "List templates",
        "The templates that are not archived; with `archived=true`, the archived ones only."
        + CURSORS,
        response=one(ex.template_list()),
    ),
    ("get", "/v1/templates/{template_id}"): Doc(
        TEMPLATES,
        "Retrieve a template",
        "A template of this account and mode, archived ones included; any other id answers 404.",
        response=one(ex.template()),
    ),
    ("patch", "/v1/templates/{template_id}"): Doc(
        TEMPLATES,
        "Update a template",
        "Changes the fields sent. `design` and `redemption` are replaced whole (`redemption: "
        "null` restores the type's defaults). A new `design` increments `design_version` and "
        "starts a `template_rollout` job that re-renders, re-signs and pushes every pass "
        "(`rollout_job_id`). `archived: true` archives the template, `false` restores it; "
        "`require_download_link: true` makes the permanent pass URLs answer 404 at once."
        + IDEMPOTENT,
        request=one(ex.TEMPLATE_UPDATE),
        response=one(ex.updated_template()),
    ),
    ("delete", "/v1/templates/{template_id}"): Doc(
        TEMPLATES,
        "Archive a template",
        "Archives the template: it answers `deleted: true`, as the spec requires, but the "
        "template is **archived, not deleted**. Its passes stay valid, no pass can be issued "
        "from it, it leaves the list (`GET /v1/templates?archived=true` shows it) and is still "
        "returned by `GET /v1/templates/{id}`; `PATCH` with `archived: false` restores it. "
        "Archiving again answers the same.",
        response=one(ex.DELETED_TEMPLATE),
    ),
    ("post", "/v1/passes"): Doc(
        PASSES,
        "Issue a pass",
        "Issues a pass from a template: signs its `.pkpass`, makes its Google Wallet save link "
        "and records a `created` event (webhooks: `pass.issued`). `field_values` fill the "
        "template's fields (keys must be its field keys; a field without a value shows its "
        "default). `url` is the pass's landing page, `download_url` its `.pkpass`." + IDEMPOTENT,
        request=one(ex.PASS_CREATE, "Ada's ticket, as in the README"),
        response=one(ex.PASS),
    ),
    ("get", "/v1/passes"): Doc(
        PASSES,
        "List passes",
        "Passes of this account and mode, filtered by `template_id`, `holder_email` "
        "(matched case-insensitively) and `voided`." + CURSORS,
        response=one(ex.listed(ex.PASS)),
    ),
    ("get", "/v1/passes/{pass_id}"): Doc(
        PASSES,
        "Retrieve a pass",
        "A pass of this account and mode; another account's or mode's answers 404 like a "
        "missing one.",
        response=one(ex.PASS),
    ),
    ("patch", "/v1/passes/{pass_id}"): Doc(
        PASSES,
        "Update a pass",
        "Merges `field_values` and `metadata` into the pass's (a metadata key sent as `null` is "
        "removed; a field value sent as `null` is removed, so the field shows its template "
        "default again); `holder_name` and `holder_email` correct the holder's data (`null` "
        "removes it). The pass's "
        "`.pkpass` is rebuilt and re-signed, installed copies are updated by push, and one "
        "`updated` event is recorded (webhooks: `pass.update_pushed`). A voided pass answers "
        "400 `pass_voided`." + IDEMPOTENT,
        request=one(ex.PASS_UPDATE, "A new seat"),
        response=one(ex.UPDATED_PASS),
    ),
    ("delete", "/v1/passes/{pass_id}"): Doc(
        PASSES,
        "Void a pass",
        "Voids the pass (passes are never deleted): `voided: true`, `voided_at` set, the "
        "`.pkpass` rebuilt as voided and pushed, one `voided` event. Voiding a voided pass "
        "answers it unchanged.",
        response=one(ex.VOIDED_PASS),
    ),
    ("post", "/v1/passes/{pass_id}/redact"): Doc(
        PASSES,
        "Redact a pass",
        "Honours an erasure request: erases the holder's data (`holder_name`, `holder_email`), "
        "the field values and the metadata, and their copies in events, webhook deliveries and "
        "scans; voids the pass, rebuilds its file without personal data and records a `voided` "
        'event with `metadata.reason: "redacted"`. What remains: ids, timestamps and counts '
        "(docs/privacy.md). No request body. Redacting again is allowed: it erases again and "
        "records another event." + IDEMPOTENT,
        response=one(ex.REDACTED_PASS),
    ),
    ("get", "/v1/passes/{pass_id}/events"): Doc(
        EVENTS,
        "List a pass's events",
        "The lifecycle events of one pass, filtered by `type`; 404 for an unknown pass. Events "
        "are recorded asynchronously: one may take a moment to appear." + CURSORS,
        response=one(ex.EVENTS),
    ),
    ("post", "/v1/passes/batch"): Doc(
        PASSES,
        "Issue up to 100 passes",
        "1 to 100 `POST /v1/passes` bodies. Each row succeeds or fails on its own, with the "
        "status and error the single create would answer (`index` is its place in `passes`); "
        "the passes made are written in one transaction. With `bundle: true` (at most 10 rows) "
        "the answer also holds a pass bundle of the passes made. The whole batch is one "
        "request under one `Idempotency-Key`.",
        request=one(ex.BATCH_CREATE),
        response=one(ex.BATCH, "One row issued, one refused"),
    ),
    ("post", "/v1/passes/{pass_id}/download-links"): Doc(
        PASSES,
        "Create a download link",
        "An expiring link to the pass (`expires_in`: 60 seconds to 7 days, default 3600) that "
        "behaves like its permanent `url` until `expires_at`, then answers 410. The token in "
        "`url` is shown only in this answer (Tessera keeps its hash). Links are independent; a "
        "voided pass answers 400 `pass_voided`." + IDEMPOTENT,
        request=one(ex.DOWNLOAD_LINK_CREATE),
        response=one(ex.DOWNLOAD_LINK),
    ),
    ("post", "/v1/pass_bundles"): Doc(
        BUNDLES,
        "Create a pass bundle",
        "Bundles 1 to 10 passes that are not voided (of any templates) for one `.pkpasses` "
        "download (Apple Wallet adds them together) and one landing page. A bundle never "
        "changes; its URLs show its passes' current versions." + IDEMPOTENT,
        request=one(ex.BUNDLE_CREATE),
        response=one(ex.BUNDLE),
    ),
    ("get", "/v1/pass_bundles/{bundle_id}"): Doc(
        BUNDLES,
        "Retrieve a pass bundle",
        "A bundle of this account and mode; there is no list.",
        response=one(ex.BUNDLE),
    ),
    ("post", "/v1/jobs"): Doc(
        JOBS,
        "Create a job",
        "`import_passes` issues one pass per row (1 to 100,000 rows, each a `POST /v1/passes` "
        "body without `template_id`); `update_passes` sets `field_values` and `metadata` on "
        "every pass of the template that is not voided. Answers **202** with the job; follow it "
        "with `GET /v1/jobs/{id}` and read each row's outcome from `/results`. Bad rows fail "
        "alone; the quota is reserved for the good ones. Bodies up to 64 MiB." + IDEMPOTENT,
        request={
            "import": ("Import two passes", ex.IMPORT_JOB_CREATE),
            "update": ("Set a field on every pass", ex.UPDATE_JOB_CREATE),
        },
        response=one(ex.JOB, "Just created"),
    ),
    ("post", "/v1/jobs/import_passes"): Doc(
        JOBS,
        "Create an import job from CSV",
        "The rows of an `import_passes` job as CSV (`Content-Type: text/csv`, UTF-8): the "
        "header names `holder_name`, `holder_email`, the template's field keys and "
        "`metadata.<key>` columns; each record after it is a row (row 1 is the first). An empty "
        "cell is no value. For example:\n\n```\n" + ex.CSV_IMPORT + "```\n\nAnswers **202** "
        "with the job. `tessera import FILE.csv --template tmpl_...` does this and follows the "
        "job." + IDEMPOTENT,
        response=one(ex.JOB),
    ),
    ("get", "/v1/jobs"): Doc(
        JOBS,
        "List jobs",
        "Jobs of this account and mode, filtered by `type`, `template_id` and `status`." + CURSORS,
        response=one(ex.listed(ex.FINISHED_JOB)),
    ),
    ("get", "/v1/jobs/{job_id}"): Doc(
        JOBS,
        "Retrieve a job",
        "Its status and counters: `processed`, `succeeded` and `failed` only grow; `errors` "
        "holds the first 100 failures (every one is in the results).",
        response=one(ex.FINISHED_JOB),
    ),
    ("post", "/v1/jobs/{job_id}/cancel"): Doc(
        JOBS,
        "Cancel a job",
        "The job takes no new work and answers `canceled`; what is done stays done, and the "
        "rows never processed appear in the results with the error `job_canceled`. A finished "
        "job answers unchanged.",
        response=one(ex.CANCELED_JOB),
    ),
    ("get", "/v1/jobs/{job_id}/results"): Doc(
        JOBS,
        "Stream a job's results",
        "One line per processed row, in row order: its pass id and links, or its error. "
        "NDJSON by default; CSV with `Accept: text/csv`. While the job runs, the rows processed "
        "so far.",
        responses={
            "200": {
                "description": "One line per processed row, in row order.",
                "content": {
                    "application/x-ndjson": {
                        "schema": {"type": "string"},
                        "example": ex.RESULTS_NDJSON,
                    },
                    "text/csv": {"schema": {"type": "string"}, "example": ex.RESULTS_CSV},
                },
            }
        },
    ),
    ("get", "/v1/events"): Doc(
        EVENTS,
        "List events",
        "Recent lifecycle events across every pass of this account and mode, filtered by "
        "`type`." + CURSORS,
        response=one(ex.EVENTS),
    ),
}
