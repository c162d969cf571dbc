"""The decision of a scan, as plain functions of the pass, its template's policy and the time
(docs/redemption.md). The command that applies it, counts and records it is scans.py."""

from datetime import datetime

from services.issuer.content import metadata_dates
from services.issuer.google.objects import expand_barcode_message
from shared.design import Design
from shared.models import PassRecord
from shared.redemption import RedemptionPolicy
from shared.scans import RejectReason


def barcode_message(design: Design, record: PassRecord) -> str | None:
    """The message of the pass's barcode as the wallets show it (Apple's first non-empty
    barcode, the one Google shows too), or None for a pass without one: what a scanned code
    is looked up by."""
    for barcode in design.barcode_list():
        message = expand_barcode_message(
            barcode.message,
            serial_number=record.serial_number,
            short_id=record.short_id,
            field_values=record.field_values,
        )
        if message:
            return message
    return None


def pass_expires_at(record: PassRecord, design: Design) -> datetime | None:
    """When the wallets show the pass as expired: its own `metadata.expiration_date`, else its
    design's `expiration_date` (as pass.json and the Google object say)."""
    own = metadata_dates(record.metadata, strict=False).expiration_date
    return own or design.expiration_date


def decide(
    record: PassRecord,
    policy: RedemptionPolicy,
    now: datetime,
    expires_at: datetime | None = None,
) -> RejectReason | None:
    """Why a scan of `record` now is rejected, or None when it is accepted. `expires_at`: the
    pass's own end (`pass_expires_at`), which the policy's window cannot express for passes
    that end on different dates (memberships). A pass of an archived template is decided like
    any other: archiving stops issuing, not admitting."""
    if record.voided:
        return "voided"
    if policy.valid_from is not None and now < policy.valid_from:
        return "not_yet_valid"
    if policy.valid_until is not None and now >= policy.valid_until:
        return "expired"
    if expires_at is not None and now >= expires_at:
        return "expired"
    limit = policy.max_redemptions
    if limit is not None and record.redemption_count >= limit:
        return "already_redeemed"
    return None


def uses_up(record: PassRecord, policy: RedemptionPolicy) -> bool:
    """Whether accepting a scan of `record` uses its last redemption and marks it used."""
    limit = policy.max_redemptions
    return (
        policy.on_limit == "mark_used"
        and limit is not None
        and record.redemption_count + 1 >= limit
    )


def at_limit_unmarked(record: PassRecord, policy: RedemptionPolicy) -> bool:
    """Whether `record` has used every redemption its policy allows and should render as used,
    but does not yet: a limit lowered below its count (docs/redemption.md), or a pass counted
    while it could not be rebuilt."""
    limit = policy.max_redemptions
    return (
        policy.on_limit == "mark_used"
        and limit is not None
        and not record.used_up
        and record.redemption_count >= limit
    )
