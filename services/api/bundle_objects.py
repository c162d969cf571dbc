"""The pass bundle object (docs/api-decisions.md#pass-bundles): what POST /v1/pass_bundles, GET
/v1/pass_bundles/{id} and a batch with `bundle: true` answer."""

from typing import Literal

from pydantic import BaseModel, Field

from shared.clock import iso
from shared.models import PassBundleRecord


def bundle_urls(site_url: str, bundle_id: str) -> tuple[str, str]:
    """A bundle's landing page and its .pkpasses under {site_url}."""
    page = f"{site_url}/b/{bundle_id}"
    return page, f"{page}.pkpasses"


class PassBundleObject(BaseModel):
    id: str = Field(description="Unique identifier, prefix `pbdl_`; the bundle's only secret.")
    object: Literal["pass_bundle"] = Field("pass_bundle", description="Always `pass_bundle`.")
    pass_ids: list[str] = Field(description="Its passes, in the order sent.")
    url: str = Field(description="The bundle's landing page, under {site_url}.")
    download_url: str = Field(
        description="All its passes that are not voided in one `.pkpasses`, under {site_url}."
    )
    created_at: str = Field(description="Creation timestamp (ISO 8601, UTC, milliseconds).")

    @classmethod
    def of(cls, record: PassBundleRecord, site_url: str) -> "PassBundleObject":
        url, download_url = bundle_urls(site_url, record.id)
        return cls(
            id=record.id,
            pass_ids=record.pass_ids,
            url=url,
            download_url=download_url,
            created_at=iso(record.created_at),
        )
