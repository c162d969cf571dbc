"""The pass bundle object (docs/api-decisions.md#pass-bundles): what POST /v1/pass_bundles, GET
/v1/pass_bundles/{id} and a batch with `bundle: true` answer."""

from typing import Literal

from pydantic import BaseModel

from shared.clock import iso
from shared.models import PassBundleRecord


def bundle_urls(site_url: str, bundle_id: str) -> tuple[str, str]:
    """A bundle's landing page and its .pkpasses under {site_url}."""
    page = f"{site_url}/b/{bundle_id}"
    return page, f"{page}.pkpasses"


class PassBundleObject(BaseModel):
    id: str
    object: Literal["pass_bundle"] = "pass_bundle"
    pass_ids: list[str]
    url: str
    download_url: str
    created_at: str

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
