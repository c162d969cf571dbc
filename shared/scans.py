"""Scan records: every scan the issuer decided, accepted or rejected (docs/redemption.md).

The issuer writes them (collection `scans`) in the transaction that decides the scan; the api
reads them through `IssuerReads` as these models.
"""

from datetime import datetime
from typing import Any, Final, Literal

from pydantic import BaseModel, Field

from shared.models import Mode

ScanResult = Literal["accepted", "rejected"]
RejectReason = Literal[
    "unknown_code", "already_redeemed", "voided", "not_yet_valid", "expired", "wrong_mode"
]
MAX_CODE_CHARS: Final = 2048
MAX_LOCATION_CHARS: Final = 200


class ScannedPass(BaseModel):
    """The pass a scan identified, as it was at the scan (what a scanner shows)."""

    id: str
    holder_name: str | None
    template_id: str
    field_values: dict[str, str]


class ScanRecord(BaseModel):
    model_config = {"populate_by_name": True, "extra": "ignore"}

    id: str = Field(alias="_id")
    account_id: str
    mode: Mode
    pass_id: str | None = None
    result: ScanResult
    reason: RejectReason | None = None
    # The code as scanned (at most MAX_CODE_CHARS, which the api enforces), or None for a
    # scan by pass id.
    code: str | None = None
    location: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    redemption_count: int = 0
    redemptions_remaining: int | None = None
    scanned_pass: ScannedPass | None = None
    created_at: datetime

    def to_document(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True)
