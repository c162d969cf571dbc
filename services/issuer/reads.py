"""What other services may read of the issuer's data: the only module of the issuer they import.

Queries stay here, next to the indexes `IssuerRepository.ensure_indexes` makes for them, and
answer read models from shared/ (records and views), never raw documents. Every read that
serves the v1 API filters on `account_id` and `mode`; the unscoped ones serve the public pass
pages (by short id or link token), the wallet web service (by serial) and Google callbacks.
"""

import logging
from typing import Any

from services.issuer.bundle import pkpass_zip
from services.issuer.jobs.reads import JobReads
from shared.bounded_cache import BoundedCache
from shared.models import (
    DownloadLinkRecord,
    PassBundleRecord,
    PassRecord,
    TemplateRecord,
    email_key,
)
from shared.mongo import Database
from shared.pagination import Page, PageRequest, fetch_page
from shared.scans import ScanRecord
from shared.views import PassFileMeta, PassFileView

log = logging.getLogger(__name__)

READ_ASSETS_CACHE_BYTES = 32 * 1024 * 1024
_FILE_META = {"version": 1, "pass_type_identifier": 1, "last_modified": 1}


class IssuerReads:
    def __init__(self, db: Database):
        self._templates = db["templates"]
        self._passes = db["passes"]
        self._pass_files = db["pass_files"]
        self._template_assets = db["template_assets"]
        self._download_links = db["download_links"]
        self._pass_bundles = db["pass_bundles"]
        self._scans = db["scans"]
        # Jobs and their results (services/issuer/jobs/reads.py).
        self.jobs = JobReads(db)
        # Asset sets never change under their id (a digest of the files): cached freely.
        self._assets: BoundedCache[str, tuple[tuple[str, bytes], ...]] = BoundedCache(
            READ_ASSETS_CACHE_BYTES, lambda files: sum(len(data) for _, data in files)
        )

    async def template(self, account_id: str, mode: str, template_id: str) -> TemplateRecord | None:
        doc = await self._templates.find_one(
            {"_id": template_id, "account_id": account_id, "mode": mode}
        )
        return None if doc is None else TemplateRecord.model_validate(doc)

    async def templates_page(
        self, account_id: str, mode: str, page: PageRequest, *, archived: bool = False
    ) -> Page[TemplateRecord]:
        query = {"account_id": account_id, "mode": mode, "archived": archived}
        return await fetch_page(self._templates, query, page, TemplateRecord.model_validate)

    async def template_by_id(self, template_id: str) -> TemplateRecord | None:
        doc = await self._templates.find_one({"_id": template_id})
        return None if doc is None else TemplateRecord.model_validate(doc)

    async def pass_(self, account_id: str, mode: str, pass_id: str) -> PassRecord | None:
        doc = await self._passes.find_one({"_id": pass_id, "account_id": account_id, "mode": mode})
        return None if doc is None else PassRecord.model_validate(doc)

    async def passes_page(
        self,
        account_id: str,
        mode: str,
        page: PageRequest,
        *,
        template_id: str | None = None,
        holder_email: str | None = None,
        voided: bool | None = None,
    ) -> Page[PassRecord]:
        query: dict[str, Any] = {"account_id": account_id, "mode": mode}
        if template_id is not None:
            query["template_id"] = template_id
        if voided is not None:
            query["voided"] = voided
        if holder_email is not None:
            # The normalised copy, case-insensitively (indexed). A pass stored before that
            # copy existed gets it at the issuer's start (IssuerRepository.backfill_email_keys).
            query["holder_email_key"] = email_key(holder_email)
        return await fetch_page(self._passes, query, page, PassRecord.model_validate)

    async def scans_page(
        self,
        account_id: str,
        mode: str,
        page: PageRequest,
        *,
        pass_id: str | None = None,
        result: str | None = None,
    ) -> Page[ScanRecord]:
        """Scans newest first (docs/redemption.md); by the (account, mode[, pass_id | result],
        _id) indexes of services/issuer/scan_store.py."""
        query: dict[str, Any] = {"account_id": account_id, "mode": mode}
        if pass_id is not None:
            query["pass_id"] = pass_id
        if result is not None:
            query["result"] = result
        return await fetch_page(self._scans, query, page, ScanRecord.model_validate)

    async def pass_by_short_id(self, short_id: str) -> PassRecord | None:
        doc = await self._passes.find_one({"short_id": short_id})
        return None if doc is None else PassRecord.model_validate(doc)

    async def pass_by_id(self, pass_id: str) -> PassRecord | None:
        doc = await self._passes.find_one({"_id": pass_id})
        return None if doc is None else PassRecord.model_validate(doc)

    async def pass_by_serial(self, serial_number: str) -> PassRecord | None:
        doc = await self._passes.find_one({"serial_number": serial_number})
        return None if doc is None else PassRecord.model_validate(doc)

    async def pass_versions(self, pass_ids: list[str]) -> dict[str, tuple[str, int]]:
        """pass id -> (serial number, version) for the passes that exist."""
        cursor = self._passes.find({"_id": {"$in": pass_ids}}, {"serial_number": 1, "version": 1})
        return {doc["_id"]: (doc["serial_number"], int(doc["version"])) async for doc in cursor}

    async def pass_bundle(
        self, account_id: str, mode: str, bundle_id: str
    ) -> PassBundleRecord | None:
        doc = await self._pass_bundles.find_one(
            {"_id": bundle_id, "account_id": account_id, "mode": mode}
        )
        return None if doc is None else PassBundleRecord.model_validate(doc)

    async def pass_bundle_by_id(self, bundle_id: str) -> PassBundleRecord | None:
        """For the bundle's public pages (`{site_url}/b/{id}`)."""
        doc = await self._pass_bundles.find_one({"_id": bundle_id})
        return None if doc is None else PassBundleRecord.model_validate(doc)

    async def erased_pass_ids(self, pass_ids: list[str]) -> set[str]:
        """Those of `pass_ids` whose passes are as a redaction leaves them (voided, no holder,
        no field values, no metadata): their ids alone, nothing of the passes is read back."""
        erased = {
            "_id": {"$in": pass_ids},
            "voided": True,
            "holder_name": None,
            "holder_email": None,
            "field_values": {},
            "metadata": {},
        }
        return {doc["_id"] async for doc in self._passes.find(erased, {"_id": 1})}

    async def passes_by_ids(self, pass_ids: list[str]) -> list[PassRecord]:
        """The passes that exist among `pass_ids`, in the order of `pass_ids`."""
        cursor = self._passes.find({"_id": {"$in": pass_ids}})
        found = {doc["_id"]: PassRecord.model_validate(doc) async for doc in cursor}
        return [found[pass_id] for pass_id in pass_ids if pass_id in found]

    async def download_link(self, token_hash: str) -> DownloadLinkRecord | None:
        doc = await self._download_links.find_one({"token_hash": token_hash})
        return None if doc is None else DownloadLinkRecord.model_validate(doc)

    async def pass_file(self, pass_id: str) -> PassFileView | None:
        """The pass's current .pkpass; the zip is put together from the pass's own files and
        its template version's assets (stored once per template version)."""
        doc = await self._pass_files.find_one({"_id": pass_id})
        if doc is None:
            return None
        assets = await self._asset_files(str(doc["assets_id"]))
        if assets is None:
            log.error("pass file %s refers to missing assets %s", pass_id, doc["assets_id"])
            return None
        parts = (bytes(doc["pass_json"]), assets, bytes(doc["manifest"]), bytes(doc["signature"]))
        return PassFileView.model_validate({**doc, "data": pkpass_zip(*parts)})

    async def pass_file_meta(self, pass_id: str) -> PassFileMeta | None:
        """The current file's version, pass type and Last-Modified, without its bytes."""
        doc = await self._pass_files.find_one({"_id": pass_id}, _FILE_META)
        return None if doc is None else PassFileMeta.model_validate(doc)

    async def _asset_files(self, assets_id: str) -> tuple[tuple[str, bytes], ...] | None:
        files = self._assets.get(assets_id)
        if files is None:
            doc = await self._template_assets.find_one({"_id": assets_id})
            if doc is None:
                return None
            files = tuple((str(file["name"]), bytes(file["data"])) for file in doc["files"])
            self._assets.put(assets_id, files)
        return files
