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

    max_redemptions: int | None
    valid_from: str | None
    valid_until: str | None
    on_limit: Literal["mark_used", "keep"]

    @classmethod
    def of(cls, policy: RedemptionPolicy) -> "RedemptionObject":
        return cls(
            max_redemptions=policy.max_redemptions,
            valid_from=_iso_or_none(policy.valid_from),
            valid_until=_iso_or_none(policy.valid_until),
            on_limit=policy.on_limit,
        )


class ScanPassObject(BaseModel):
    id: str
    holder_name: str | None
    template_id: str
    field_values: dict[str, str]


class ScanObject(BaseModel):
    id: str
    object: Literal["scan"] = "scan"
    result: ScanResult
    reason: RejectReason | None
    pass_id: str | None
    redemption_count: int
    redemptions_remaining: int | None
    location: str | None
    metadata: dict[str, Any]
    created_at: str
    # The pass the scan identified (null for an unknown code, another mode's pass).
    # `pass` is a Python keyword: the attribute is `pass_`, always serialized as `pass`.
    pass_: ScanPassObject | None = Field(None, alias="pass")

    model_config = ConfigDict(validate_by_name=True, serialize_by_alias=True)

    @classmethod
    def of(cls, record: ScanRecord) -> "ScanObject":
        scanned = record.scanned_pass
        return cls(
            id=record.id,
            result=record.result,
            reason=record.reason,
            pass_id=record.pass_id,
            redemption_count=record.redemption_count,
            redemptions_remaining=record.redemptions_remaining,
            location=record.location,
            metadata=record.metadata,
            created_at=iso(record.created_at),
            pass_=None if scanned is None else ScanPassObject(**scanned.model_dump()),
        )


class ScannerKeyObject(BaseModel):
    id: str
    object: Literal["scanner_key"] = "scanner_key"
    name: str
    mode: Mode
    revoked: bool
    revoked_at: str | None
    created_at: str


class ScannerKeyCreated(ScannerKeyObject):
    """The answer to its creation: the only one that shows the key."""

    key: str
