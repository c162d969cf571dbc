"""Read models: what an owner's `reads.py` gives another service, never a raw document.

The records in shared/models.py (`TemplateRecord`, `PassRecord`, `PassEventRecord`,
`DownloadLinkRecord`, `DeliveryRecord`) are read models too; these are the views that have no
record of their own: a pass's signed file, a webhook without its encrypted secret, a device log.
"""

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from shared.models import DisabledReason, Mode


class _View(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="ignore", frozen=True)


class PassFileMeta(_View):
    """What a pass's current .pkpass is, without its bytes."""

    pass_id: str = Field(alias="_id")
    version: int
    # A whole second, later for every version: the Last-Modified both .pkpass endpoints send.
    last_modified: datetime
    pass_type_identifier: str


class PassFileView(PassFileMeta):
    """A pass's current signed .pkpass."""

    data: bytes


class WebhookView(_View):
    """A subscription as other services may see it: no secret, encrypted or not."""

    id: str = Field(alias="_id")
    account_id: str
    mode: Mode
    url: str
    events: list[str]
    description: str | None = None
    enabled: bool = True
    created_at: datetime
    updated_at: datetime
    disabled_reason: DisabledReason | None = None
    disabled_at: datetime | None = None
    failing_since: datetime | None = None
    consecutive_failures: int = 0
    max_deliveries_per_second: int | None = None


class DeviceLogView(_View):
    id: str = Field(alias="_id")
    message: str
    received_at: datetime
