"""Which webhook event type (spec 6.2) a pass event fires, if any.

| pass event | webhook event type |
|---|---|
| created | pass.issued |
| downloaded (metadata.wallet apple or google) | pass.add_intent |
| installed | pass.added_to_wallet |
| updated, metadata.stage "pushed" or none (the change, pushed) | pass.update_pushed |
| updated, metadata.stage "delivered" (a device pulled the new pass) | pass.update_delivered |
| removed | pass.removed |
| voided | pass.voided |
| redeemed (an accepted scan) | pass.redeemed |
| url_viewed | none: no webhook type describes a page view |

`redeemed` is the issuer's event of an accepted scan (docs/redemption.md). The events service
records a device fetching an updated pass as `updated` with `metadata.stage` "delivered"
(services/events/registrations.py); the issuer's update carries stage "pushed".
"""

from typing import Any, get_args

from shared.messages import WebhookEventType

# Every webhook event type a subscription may name (spec 6.2), "*" aside.
WEBHOOK_EVENT_TYPES = tuple(kind for kind in get_args(WebhookEventType) if kind != "*")

_DIRECT = {
    "created": "pass.issued",
    "installed": "pass.added_to_wallet",
    "updated": "pass.update_pushed",
    "removed": "pass.removed",
    "voided": "pass.voided",
    "redeemed": "pass.redeemed",
}
# A download is an add intent only when it is a step toward a wallet: the .pkpass file (Apple)
# or the tap on the Google save link.
_ADD_INTENT_WALLETS = frozenset({"apple", "google"})


def webhook_type(event_type: str, metadata: dict[str, Any] | None = None) -> str | None:
    """The webhook event type of a pass event, or None when it fires no webhook."""
    metadata = metadata or {}
    if event_type == "downloaded":
        return "pass.add_intent" if metadata.get("wallet") in _ADD_INTENT_WALLETS else None
    if event_type == "updated" and metadata.get("stage") == "delivered":
        return "pass.update_delivered"
    return _DIRECT.get(event_type)
