"""The `RedeemPass` command: find the scanned pass, decide, and prepare the writes that count
the scan, record it and announce it, for the command's one transaction (docs/redemption.md).

Every scan is recorded, rejected ones and unknown codes too. An accepted one counts with a
conditional update (scan_store.py), so concurrent scans of one pass, on any replica, accept at
most as many as the policy allows; it records a `redeemed` event. The scan that uses the last
redemption of a `mark_used` policy also re-renders the pass as used (Apple: voided, Google:
COMPLETED) and publishes the new version as a live update, which pushes the pass's devices.
"""

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel

from services.issuer.artifacts import WalletArtifacts
from services.issuer.redemption import barcode_message, decide, pass_expires_at, uses_up
from services.issuer.repository import (
    IssuerRepository,
    PassFile,
    UnitOfWork,
    last_modified_after,
)
from services.issuer.scan_store import ScanStore
from shared.clock import Clock
from shared.design import Design
from shared.errors import InvalidRequest
from shared.ids import new_id
from shared.messages import LiveUpdate, PassEventMessage, RedeemPass
from shared.models import PassRecord, TemplateRecord
from shared.pass_events import pass_event
from shared.pass_values import check_barcode_fits, moves_design
from shared.redemption import RedemptionPolicy, remaining
from shared.scans import RejectReason, ScannedPass, ScanRecord

log = logging.getLogger(__name__)

Apply = Callable[[UnitOfWork], Awaitable[None]]
Prepared = tuple[BaseModel, Apply, list[PassEventMessage | LiveUpdate]]


class Redemptions:
    def __init__(
        self,
        repo: IssuerRepository,
        store: ScanStore,
        artifacts: WalletArtifacts,
        clock: Clock,
    ):
        self._repo = repo
        self._store = store
        self._artifacts = artifacts
        self._clock = clock

    async def redeem(self, cmd: RedeemPass) -> Prepared:
        found = await self._find(cmd)
        if isinstance(found, str):
            return self._rejected(cmd, found, None, None)
        record = found
        template = await self._repo.template(cmd.account_id, cmd.mode, record.template_id)
        if template is None:  # a pass outlives nothing: templates are archived, never deleted
            return self._rejected(cmd, "unknown_code", None, None)
        policy = template.policy()
        now = self._clock.now()
        expires_at = pass_expires_at(record, Design.from_stored(template.design))
        reason = decide(record, policy, now, expires_at)
        if reason is not None:
            return self._rejected(cmd, reason, record, policy.max_redemptions)
        return await self._accepted(cmd, record, template, policy)

    async def _find(self, cmd: RedeemPass) -> PassRecord | RejectReason:
        """The scanned pass of the account and mode, or why there is none to decide."""
        if cmd.pass_id is not None:
            found = await self._repo.pass_(cmd.account_id, cmd.mode, cmd.pass_id)
            candidates = [] if found is None else [found]
        else:
            candidates = await self._store.passes_by_code(cmd.account_id, cmd.mode, cmd.code or "")
        if len(candidates) == 1:
            return candidates[0]
        if len(candidates) > 1:
            # Several passes show this code (a constant barcode message): none is identified.
            return "unknown_code"
        # A test key never redeems a live pass (nor a live key a test one); another account's
        # code answers exactly like an unknown one.
        elsewhere = await self._store.in_other_mode(
            cmd.account_id, cmd.mode, code=cmd.code, pass_id=cmd.pass_id
        )
        return "wrong_mode" if elsewhere else "unknown_code"

    def _scan(
        self,
        cmd: RedeemPass,
        record: PassRecord | None,
        limit: int | None,
        reason: RejectReason | None,
    ) -> ScanRecord:
        count = 0 if record is None else record.redemption_count
        scanned = None
        if record is not None:
            scanned = ScannedPass(
                id=record.id,
                holder_name=record.holder_name,
                template_id=record.template_id,
                field_values=record.field_values,
            )
        return ScanRecord(
            id=new_id("scan"),
            account_id=cmd.account_id,
            mode=cmd.mode,
            pass_id=None if record is None else record.id,
            result="rejected" if reason else "accepted",
            reason=reason,
            code=cmd.code,
            location=cmd.location,
            metadata=cmd.metadata,
            redemption_count=count,
            redemptions_remaining=None if record is None else remaining(count, limit),
            scanned_pass=scanned,
            created_at=self._clock.now(),
        )

    def _rejected(
        self,
        cmd: RedeemPass,
        reason: RejectReason,
        record: PassRecord | None,
        limit: int | None,
    ) -> Prepared:
        scan = self._scan(cmd, record, limit, reason)

        async def apply(uow: UnitOfWork) -> None:
            if record is not None:
                await self._store.confirm_unchanged(record, scan.created_at, uow.session)
            await self._store.insert(scan, uow.session)

        return scan, apply, []

    async def _accepted(
        self,
        cmd: RedeemPass,
        record: PassRecord,
        template: TemplateRecord,
        policy: RedemptionPolicy,
    ) -> Prepared:
        now = self._clock.now()
        limit = policy.max_redemptions
        changes: dict[str, Any] = {
            "redemption_limit": limit,
            "redemption_on_limit": policy.on_limit,
        }
        counted = record.model_copy(
            update={
                "redemption_count": record.redemption_count + 1,
                "last_redeemed_at": now,
                **changes,
            }
        )
        scan = self._scan(cmd, counted, limit, None)
        metadata = {
            "scan_id": scan.id,
            "location": cmd.location,
            "redemption_count": counted.redemption_count,
        }
        events: list[PassEventMessage | LiveUpdate] = [
            pass_event(counted, "redeemed", metadata, now)
        ]
        used = uses_up(record, policy) and not record.used_up
        pkpass: PassFile | None = None
        if used:
            try:
                counted, pkpass = await self._used_up(counted, template)
            except InvalidRequest as exc:
                # A template whose images Wallet cannot use (saved before images were cleaned)
                # cannot be re-rendered: the holder still gets in, the scan is counted and
                # recorded, and the wallet copy stays as it is until the template is fixed.
                log.warning("pass %s not marked used: %s", record.id, exc.message)
        if pkpass is not None:
            changes.update(
                used_up=True,
                updated_at=counted.updated_at,
                # The next version's Last-Modified is made after it (wallet-callbacks.md).
                file_modified_at=counted.file_modified_at,
                google_save_url=counted.google_save_url,
                # The Google object turns COMPLETED through the Google step.
                google_status=counted.google_status,
                google_sync_due=counted.google_sync_due,
                google_error=counted.google_error,
                design_version=counted.design_version,
                barcode_message=counted.barcode_message,
            )
            pushed = {"stage": "pushed", "reason": "redeemed", "scan_id": scan.id}
            events.append(LiveUpdate(event=pass_event(counted, "updated", pushed, now)))

        async def apply(uow: UnitOfWork) -> None:
            await self._store.count_redemption(
                record, changes, now, uow.session, bump_version=pkpass is not None
            )
            if pkpass is not None:
                await uow.store_pass_file(record.id, pkpass, now)
            await self._store.insert(scan, uow.session)

        return scan, apply, events

    async def _used_up(
        self, record: PassRecord, template: TemplateRecord
    ) -> tuple[PassRecord, PassFile]:
        """The pass re-rendered as used: its next version and that version's signed file, built
        from the template's current design like any new version (one a rollout has not reached
        yet, or held back: its barcodes must carry its values)."""
        design = Design.from_stored(template.design)
        if moves_design(record, template):
            check_barcode_fits(design, record.field_values)
        used = record.model_copy(
            update={
                "used_up": True,
                "version": record.version + 1,
                "design_version": template.design_version,
                "updated_at": self._clock.now(),
            }
        )
        # The code the wallet copy shows now: a scan of it finds the pass (already redeemed),
        # not `unknown_code`.
        used.barcode_message = barcode_message(design, used)
        signed = await self._artifacts.signed_pass(used, template, design)
        # With real Google credentials this upserts the object, now COMPLETED.
        self._artifacts.attach_google(used)
        await self._repo.store_assets(signed.assets.id, signed.assets.files, used.updated_at)
        previous = await self._repo.file_stamp(used)
        pkpass = PassFile(
            version=used.version,
            pass_json=signed.pass_json,
            manifest=signed.manifest,
            signature=signed.signature,
            assets_id=signed.assets.id,
            pass_type_identifier=self._artifacts.identities.apple.pass_type_identifier,
            last_modified=last_modified_after(used.updated_at, previous),
        )
        used.file_modified_at = pkpass.last_modified
        return used, pkpass
