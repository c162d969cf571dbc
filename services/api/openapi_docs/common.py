"""What every entry of the reference uses: the `Doc` of an operation, its examples, the tags and
the sentences many descriptions share."""

from dataclasses import dataclass, field
from typing import Any

Examples = dict[str, tuple[str, Any]]


@dataclass(frozen=True)
class Doc:
    """One operation's documentation. `request` and `response` are named examples (summary,
    value) of its JSON body and of its success answer; `responses` replaces what the route
    declares, for answers that are not JSON (pages, files, redirects)."""

    tag: str
    summary: str
    description: str
    request: Examples = field(default_factory=dict)
    response: Examples = field(default_factory=dict)
    responses: dict[str, Any] | None = None


def one(value: Any, summary: str = "Example") -> Examples:
    return {"example": (summary, value)}


TEMPLATES = "Templates"
PASSES = "Passes"
BUNDLES = "Pass bundles"
JOBS = "Jobs"
EVENTS = "Events"
WEBHOOKS = "Webhooks"
SCANS = "Scans"
SCANNER_KEYS = "Scanner keys"
PAGES = "Pages"
VARIANT_A = "Variant A"

# In the order the references show them.
TAGS: list[dict[str, str]] = [
    {
        "name": TEMPLATES,
        "description": "A template fixes the design and the fields of every "
        "pass issued from it (docs/templates.md).",
    },
    {
        "name": PASSES,
        "description": "Passes for Apple Wallet and Google Wallet, issued from a "
        "template. A pass is never deleted: it is voided.",
    },
    {
        "name": BUNDLES,
        "description": "Up to 10 passes of one order, offered as one `.pkpasses` "
        "download and one landing page.",
    },
    {
        "name": JOBS,
        "description": "Long work as a resource: imports of up to 100,000 passes and "
        "updates of every pass of a template, with their progress and per-row results.",
    },
    {
        "name": EVENTS,
        "description": "The lifecycle events of passes (`created`, `url_viewed`, "
        "`downloaded`, `installed`, `updated`, `removed`, `voided`, `redeemed`).",
    },
    {
        "name": WEBHOOKS,
        "description": "Signed notifications of pass events to your URL, with "
        "retries and a delivery history (docs/webhooks.md).",
    },
    {
        "name": SCANS,
        "description": "Scanning passes in at the door or the till, decided by the "
        "template's redemption policy (docs/redemption.md).",
    },
    {
        "name": SCANNER_KEYS,
        "description": "Keys for staff devices that can scan and do nothing else.",
    },
    {
        "name": PAGES,
        "description": "The public pages, files and redirects a pass holder opens: "
        "no API key; they answer HTML, files or redirects, not JSON (docs/pages.md).",
    },
    {
        "name": VARIANT_A,
        "description": "**Variant A**, the machine-readable description of one "
        "pass-creation operation, **version 1.0.0**: `POST /passes` with an `x-api-key` header, "
        'camelCase fields and `{"message"}` errors (spec 2.8, 4.2; docs/api-decisions.md).',
    },
]
# The route modules' own tag names, for a route that has no entry below.
TAG_NAMES = {
    "templates": TEMPLATES,
    "passes": PASSES,
    "pass bundles": BUNDLES,
    "jobs": JOBS,
    "events": EVENTS,
    "webhooks": WEBHOOKS,
    "scans": SCANS,
    "scanner keys": SCANNER_KEYS,
    "public": PAGES,
}

IDEMPOTENT = (
    " Send an `Idempotency-Key` header to make a retry safe: the same key with the same body "
    "answers the first answer (header `Idempotent-Replayed: true`) for 24 hours; with another "
    "body, 409."
)
CURSORS = (
    " Newest first. Page with `starting_after` (the last id of a page: older objects) or "
    "`ending_before` (newer ones); `has_more` says whether more follow. Unknown query parameters "
    "answer 400 `parameter_unknown`."
)
