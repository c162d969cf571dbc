"""Existing passes changed and signed again in bulk: a chunk of a template rollout or of an
update_passes job.

Each pass of the chunk is read, changed (a job type's `Change`: the new design, or the new
values), rendered with the template's current design, signed, and its `updated` event made as
a PATCH makes it (a `LiveUpdate`, so the events service pushes its devices, then records the
event, and webhooks send `pass.update_pushed`), with `metadata.job_id`. Nothing is written
here: the worker commits the passes, their files and their events in one transaction, once
per chunk. Each pass is replaced only at the version it was read at, so a pass changed
meanwhile (a PATCH) makes the chunk be prepared again from fresh reads rather than lose that
change, and a pass is never changed twice by one job.
"""

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from services.issuer.artifacts import WalletArtifacts
from services.issuer.assets import PassAssets, pass_assets
from services.issuer.jobs.registry import ChunkResult
from services.issuer.jobs.store import Chunk
from services.issuer.pkpass import sign_pass
from services.issuer.redemption import at_limit_unmarked, barcode_message
from services.issuer.repository import IssuerRepository, PassFile, UnitOfWork, last_modified_after
from shared.clock import Clock
from shared.design import Design
from shared.errors import ApiError, InvalidRequest, not_found, pass_voided
from shared.messages import LiveUpdate
from shared.metrics import PKPASS_BUILD
from shared.models import JobRecord, JobRowOutcome, PassRecord, TemplateRecord, row_error
from shared.outbox import OutboxMessage
from shared.pass_events import pass_event


@dataclass(frozen=True)
class Changed:
    """What a job type changes on one pass: the record's new fields (besides its version, its
    design_version and updated_at) and the `updated` event's metadata."""

    updates: dict[str, Any]
    event_metadata: dict[str, Any]


class Change(Protocol):
    def __call__(
        self, job: JobRecord, template: TemplateRecord, design: Design, record: PassRecord
    ) -> Changed | None:
        """The change of `record`, None to leave it as it is; raises the pass's ApiError."""
        ...


@dataclass(frozen=True)
class _Rebuilt:
    record: PassRecord
    before: PassRecord  # as read
    file: PassFile
    event: LiveUpdate


class PassRerenderer:
    def __init__(self, repo: IssuerRepository, artifacts: WalletArtifacts, clock: Clock):
        self._repo = repo
        self._artifacts = artifacts
        self._clock = clock

    async def run(self, job: JobRecord, chunk: Chunk, change: Change) -> ChunkResult:
        pass_ids = [str(item) for item in chunk.items]
        template = await self._repo.template(job.account_id, job.mode, job.template_id or "")
        if template is None:  # templates are archived, never deleted: a defect if it happens
            error = row_error(not_found("template", job.template_id or ""))
            return ChunkResult(outcomes=[JobRowOutcome(pass_id=p, error=error) for p in pass_ids])
        design = Design.from_stored(template.design)
        try:
            assets = await asyncio.to_thread(pass_assets, design, template.apple_style)
        except ValueError as exc:
            invalid = row_error(
                InvalidRequest(
                    f"Template '{template.id}' has an image Wallet cannot use: {exc}. Replace "
                    f"it with PATCH /v1/templates/{template.id}.",
                    code="template_image_invalid",
                )
            )
            return ChunkResult([JobRowOutcome(pass_id=p, error=invalid) for p in pass_ids])
        now = self._clock.now()
        await self._repo.store_assets(assets.id, assets.files, now)
        records = await self._repo.passes_by_id(job.account_id, job.mode, pass_ids)
        stamps = await self._repo.file_stamps(list(records.values()))
        # CPU work, off the event loop (as services/issuer/bulk.py prepares new passes).
        outcomes, rebuilt = await asyncio.to_thread(
            self._rebuild_all, job, template, design, assets, pass_ids, records, change, stamps
        )
        return ChunkResult(
            outcomes=outcomes,
            write=_writer(rebuilt),
            events=_events(rebuilt),
        )

    def _rebuild_all(
        self,
        job: JobRecord,
        template: TemplateRecord,
        design: Design,
        assets: PassAssets,
        pass_ids: Sequence[str],
        records: dict[str, PassRecord],
        change: Change,
        stamps: dict[str, Any],
    ) -> tuple[list[JobRowOutcome], list[_Rebuilt]]:
        outcomes: list[JobRowOutcome] = []
        rebuilt: list[_Rebuilt] = []
        for pass_id in pass_ids:
            record = records.get(pass_id)
            if record is None:
                error = row_error(not_found("pass", pass_id))
                outcomes.append(JobRowOutcome(pass_id=pass_id, error=error))
                continue
            if record.voided:
                # Voided since the job began: its file stays as it is, and its result says so,
                # as a PATCH of it would (it was listed as changed).
                error = row_error(pass_voided(record.id))
                outcomes.append(
                    JobRowOutcome(pass_id=pass_id, short_id=record.short_id, error=error)
                )
                continue
            outcome = JobRowOutcome(pass_id=pass_id, short_id=record.short_id)
            outcomes.append(outcome)
            try:
                changed = change(job, template, design, record)
                if changed is None:
                    continue
                rebuilt.append(
                    self._rebuild(job, template, design, assets, record, changed, stamps)
                )
            except ApiError as exc:
                if exc.status >= 500:
                    raise  # not the pass's fault: the chunk is tried again
                outcome.error = row_error(exc)
        return outcomes, rebuilt

    def _rebuild(
        self,
        job: JobRecord,
        template: TemplateRecord,
        design: Design,
        assets: PassAssets,
        record: PassRecord,
        changed: Changed,
        stamps: dict[str, Any],
    ) -> _Rebuilt:
        now = self._clock.now()
        updated = record.model_copy(
            update={
                **changed.updates,
                "version": record.version + 1,
                "design_version": template.design_version,
                "updated_at": now,
            }
        )
        if at_limit_unmarked(updated, template.policy()):
            updated.used_up = True  # its limit was lowered below its count (docs/redemption.md)
        # What a scanned code is looked up by: a design or values change may change it.
        updated.barcode_message = barcode_message(design, updated)
        content = self._artifacts.content(updated, template, design)
        with PKPASS_BUILD.time():
            signed = sign_pass(content, self._artifacts.identities.apple, assets)
        # With Google credentials, the object is upserted only if it is not already the one
        # at Google (the class, which the design's own changes reach, is the PATCH's).
        object_changed = self._artifacts.google_object_changed(template, design, record, updated)
        self._artifacts.attach_google(updated, object_changed=object_changed)
        file = PassFile(
            version=updated.version,
            pass_json=signed.pass_json,
            manifest=signed.manifest,
            signature=signed.signature,
            assets_id=signed.assets.id,
            pass_type_identifier=self._artifacts.identities.apple.pass_type_identifier,
            last_modified=last_modified_after(now, stamps.get(record.id)),
        )
        updated.file_modified_at = file.last_modified
        metadata = {"stage": "pushed", **changed.event_metadata, "job_id": job.id}
        event = LiveUpdate(event=pass_event(updated, "updated", metadata, now))
        return _Rebuilt(updated, record, file, event)


def _events(rebuilt: Sequence[_Rebuilt]) -> list[OutboxMessage]:
    return [one.event for one in rebuilt]


def _writer(rebuilt: Sequence[_Rebuilt]) -> Callable[[UnitOfWork], Awaitable[None]]:
    async def write(uow: UnitOfWork) -> None:
        # The passes first: one changed since it was read aborts the chunk's transaction.
        await uow.replace_passes([(one.before, one.record) for one in rebuilt])
        await uow.store_pass_files(
            [(one.record.id, one.file, one.record.updated_at) for one in rebuilt]
        )

    return write
