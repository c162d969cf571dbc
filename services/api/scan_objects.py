"""The objects of scanning (docs/redemption.md): a template's redemption policy, a scan and a
scanner key, as the v1 API answers them and the OpenAPI document describes them."""

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from shared.clock import iso
from shared.models import Mode
from shared.redemption import RedemptionPolicy
from shared.scans import RejectReason, ScanRecord, ScanResult


def _iso_or_none(moment: datetime | None) -> str | None:
    return None if moment is None else iso(moment)


class RedemptionObject(BaseModel):
    """A template's effective redemption policy."""

    max_redemptions: int | None = Field(description="Accepted scans per pass; null for unlimited.")
    valid_from: str | None = Field(
        description="Scans before this moment are rejected `not_yet_valid`; null for no bound."
    )
    valid_until: str | None = Field(
        description="Scans from this moment on are rejected `expired`; null for no bound."
    )
    on_limit: Literal["mark_used", "keep"] = Field(
        description="`mark_used`: the scan that uses the last redemption marks the wallet "
        "copy used; `keep`: it does not."
    )

    @classmethod
    def of(cls, policy: RedemptionPolicy) -> "RedemptionObject":
        return cls(
            max_redemptions=policy.max_redemptions,
            valid_from=_iso_or_none(policy.valid_from),
            valid_until=_iso_or_none(policy.valid_until),
            on_limit=policy.on_limit,
        )


class ScanPassObject(BaseModel):
    id: str = Field(description="The pass's id.")
    holder_name: str | None = Field(description="The holder's name, for staff to check.")
    template_id: str = Field(description="The pass's template.")
    field_values: dict[str, str] = Field(
        description="The pass's field values (the seat, say), as they were at the scan."
    )


class ScanObject(BaseModel):
    id: str = Field(description="Unique identifier, prefix `scan_`.")
    object: Literal["scan"] = Field("scan", description="Always `scan`.")
    result: ScanResult = Field(description="`accepted` or `rejected`.")
    reason: RejectReason | None = Field(
        description="Why it was rejected: `unknown_code`, `wrong_mode`, `voided`, "
        "`not_yet_valid`, `expired` or `already_redeemed`; null when accepted."
    )
    pass_id: str | None = Field(
        description="The pass the scan identified; null for an unknown code."
    )
    code: str | None = Field(
        description="The code as scanned, for staff who check why a code was refused; null "
        "for a scan by pass id, and once the pass whose code it was is redacted."
    )
    redemption_count: int = Field(description="The pass's accepted scans after this one.")
    redemptions_remaining: int | None = Field(
        description="How many more scans the pass accepts after this one; null for unlimited."
    )
    location: str | None = Field(description="Where it was scanned, as sent.")
    metadata: dict[str, Any] = Field(description="Your own data about the scan, as sent.")
    created_at: str = Field(description="When it was scanned.")
    # `pass` is a Python keyword: the attribute is `pass_`, always serialized as `pass`.
    pass_: ScanPassObject | None = Field(
        None,
        alias="pass",
        description="The pass the scan identified, as staff need to see it; null for an "
        "unknown code or another mode's pass.",
    )

    model_config = ConfigDict(validate_by_name=True, serialize_by_alias=True)

    @classmethod
    def of(cls, record: ScanRecord) -> "ScanObject":
        scanned = record.scanned_pass
        return cls(
            id=record.id,
            result=record.result,
            reason=record.reason,
            pass_id=record.pass_id,
            code=record.code,
            redemption_count=record.redemption_count,
            redemptions_remaining=record.redemptions_remaining,
            location=record.location,
            metadata=record.metadata,
            created_at=iso(record.created_at),
            pass_=None if scanned is None else ScanPassObject(**scanned.model_dump()),
        )


class ScannerKeyObject(BaseModel):
    id: str = Field(description="Unique identifier, prefix `skey_`.")
    object: Literal["scanner_key"] = Field("scanner_key", description="Always `scanner_key`.")
    name: str = Field(description="Its name.")
    mode: Mode = Field(description="`test` or `live`: the passes it can scan.")
    revoked: bool = Field(description="Whether it was revoked.")
    revoked_at: str | None = Field(description="When it was revoked; null while it works.")
    created_at: str = Field(description="Creation timestamp (ISO 8601, UTC, milliseconds).")


class ScannerKeyCreated(ScannerKeyObject):
    """The answer to its creation: the only one that shows the key."""

    key: str = Field(
        description="The key (`svc_scan_test_...` or `svc_scan_live_...`), shown only in "
        "this answer."
    )
