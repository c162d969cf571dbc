"""The issuer's domain logic: templates and passes, each command idempotent by its command_id.

A command is prepared from reads (validation, rendering and signing happen here), then its writes,
its outbox events and its stored result commit in one transaction. The outbox relay publishes
the events afterwards, so a crash between the write and the publish loses nothing. An update's
or a void's event goes out as a `LiveUpdate`: the events service, which owns the registrations,
pushes the pass's devices and then publishes the event with the push counts.
"""

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel
from pymongo.errors import OperationFailure, PyMongoError

from services.issuer.artifacts import WalletArtifacts
from services.issuer.bulk import NewPass, PassMaker, new_pass
from services.issuer.google.sync import GoogleSyncStore
from services.issuer.jobs.commands import JobCommands
from services.issuer.jobs.rollout import plan_rollout
from services.issuer.jobs.store import JobStore
from services.issuer.jobs.update_passes import plan_mark_used, plan_update
from services.issuer.pass_bundles import (
    PassBundles,
    batch_bundle,
    check_batch_bundle,
    hidden_refusal,
)
from services.issuer.redemption import at_limit_unmarked, barcode_message
from services.issuer.repository import (
    ConcurrentUpdate,
    IssuerRepository,
    PassFile,
    UnitOfWork,
    is_duplicate,
    last_modified_after,
)
from services.issuer.scan_store import ScanStore
from services.issuer.scans import Redemptions
from services.issuer.template_cache import TemplateCache
from services.issuer.validation import validate_design
from shared.clock import Clock
from shared.design import Design
from shared.errors import (
    ApiError,
    InternalError,
    InvalidRequest,
    PayloadTooLarge,
    not_found,
    pass_voided,
)
from shared.ids import new_id
from shared.messages import (
    LIVE_UPDATE_EVENT_TYPES,
    AddImportRows,
    BatchRowResult,
    CancelJob,
    CreateDownloadLink,
    CreatePass,
    CreatePassBundle,
    CreatePasses,
    CreateTemplate,
    CreateUpdatePassesJob,
    IssuerCommand,
    LiveUpdate,
    PassesCreated,
    PassEventMessage,
    PassEventType,
    RedactPass,
    RedeemPass,
    StartJob,
    UpdatePass,
    UpdateTemplate,
    VoidPass,
    ok_reply,
)
from shared.metrics import PASSES_ISSUED
from shared.models import DownloadLinkRecord, PassRecord, RowError, TemplateRecord, row_error
from shared.mongo import is_write_conflict
from shared.nats import COMMAND_HEADROOM_BYTES
from shared.outbox import OutboxRelay
from shared.pass_events import pass_event
from shared.pass_values import (
    check_barcode_fits,
    check_field_values,
    check_metadata_dates,
    check_pass_limits,
    merged,
    moves_design,
)
from shared.redemption import RedemptionPolicy, resolve_policy

log = logging.getLogger(__name__)

Apply = Callable[[UnitOfWork], Awaitable[None]]
# A command that loses a race for the same pass is prepared again from fresh reads, with a
# jittered backoff that grows to this cap, until its conflict budget runs out.
MAX_CONFLICT_BACKOFF_SECONDS = 0.25


@dataclass
class Outcome:
    result: BaseModel
    apply: Apply
    # What the outbox publishes: events, and live updates (an update's or a void's event).
    events: list[PassEventMessage | LiveUpdate] = field(default_factory=list)
    # Run once the transaction committed (a job was started: wake the job worker).
    after_commit: Callable[[], Awaitable[None]] | None = None


def _may_use_up(before: RedemptionPolicy, after: RedemptionPolicy) -> bool:
    """Whether a template's new redemption policy can mark used passes the old one did not: a
    lower (or a first) limit, or `on_limit` turned to "mark_used"."""
    if after.on_limit != "mark_used" or after.max_redemptions is None:
        return False
    lowered = before.max_redemptions is None or after.max_redemptions < before.max_redemptions
    return lowered or before.on_limit != "mark_used"


class IssuerService:
    def __init__(
        self,
        repo: IssuerRepository,
        artifacts: WalletArtifacts,
        clock: Clock,
        on_commit: Callable[[], None],
        conflict_budget_seconds: float = 4.0,
        message_limit: Callable[[], int | None] = lambda: None,
        job_store: JobStore | None = None,
        on_job_started: Callable[[], None] = lambda: None,
        google_classes: GoogleSyncStore | None = None,
        relay: OutboxRelay | None = None,
        max_prepared_age_seconds: float = 5.0,
        rollout_sweep_seconds: float = 20.0,
        templates: TemplateCache | None = None,
    ):
        self._repo = repo
        self._templates = templates
        self._max_prepared_age = max_prepared_age_seconds
        self._rollout_sweep = timedelta(seconds=rollout_sweep_seconds)
        self._maker = PassMaker(repo, artifacts, clock, templates)
        self._job_store = job_store or JobStore(repo.db)
        self._jobs = JobCommands(self._job_store, self._maker, clock)
        self._on_job_started = on_job_started
        # With Google credentials: where a design change marks its Google class due.
        self._google_classes = google_classes
        self._scan_store = ScanStore(repo.db)
        self._redemptions = Redemptions(repo, self._scan_store, artifacts, clock)
        self._bundles = PassBundles(repo, clock)
        self._message_limit = message_limit
        self._conflict_budget = conflict_budget_seconds
        self._artifacts = artifacts
        self._identities = artifacts.identities
        self._clock = clock
        self._on_commit = on_commit
        # With a relay, a command's events are published by this process right after its
        # commit (shared/outbox.py `publish_committed`) instead of waiting for a claim.
        self._relay = relay

    async def handle(self, command: IssuerCommand) -> BaseModel:
        """Run a command; a template change (or its replay) is then dropped from every
        replica's template cache before the answer."""
        result = await self._handle_with_retries(command)
        if isinstance(command, UpdateTemplate) and self._templates is not None:
            await self._templates.changed(command.template_id)
        return result

    async def _handle_with_retries(self, command: IssuerCommand) -> BaseModel:
        """Run a command, retrying write conflicts until the conflict budget is spent.

        A conflict that outlasts the budget is usually a transaction abandoned by a crashed
        issuer: the store keeps its locks until the transaction's lifetime limit (60 s on
        MongoDB). The caller gets a retryable error instead of a wait past its timeout.
        """
        deadline = time.monotonic() + self._conflict_budget
        attempt = 0
        while True:
            attempt += 1
            try:
                return await self._handle_once(command)
            except (ConcurrentUpdate, PyMongoError) as exc:
                # A conflict, or a connection that failed mid-transaction (nothing committed,
                # or the commit is found by its command id): run it again.
                retryable = isinstance(exc, ConcurrentUpdate) or is_write_conflict(exc)
                if not retryable:
                    raise
                if time.monotonic() >= deadline:
                    log.warning("command %s still conflicts; giving up", command.command_id)
                    raise InternalError(
                        "Another change to the same data is still being resolved; retry in a "
                        "few seconds with the same Idempotency-Key.",
                        code="write_conflict",
                    ) from exc
                log.info("command %s conflicted; retrying", command.command_id)
                # Jittered backoff spreads contending writers of one pass apart.
                backoff = min(MAX_CONFLICT_BACKOFF_SECONDS, 0.005 * attempt)
                await asyncio.sleep(random.uniform(0, backoff))  # noqa: S311  # jitter, not a secret

    async def _handle_once(self, command: IssuerCommand) -> BaseModel:
        """Prepare and commit the command with its processed marker. A replay (the same
        command id) is not looked up first, which would cost every command a round trip for
        the rare retry: it is prepared again, and its marker's unique key refuses its commit
        (nothing of it is written), or its preparation refuses it (the pass was voided by the
        first run, say); either way the first run's stored result answers."""
        prepared_from = time.monotonic()
        try:
            outcome = await self._prepare(command)
            self._check_sendable(outcome)
        except ApiError:
            stored = await self._repo.processed_result(command.command_id)
            if stored is None:
                raise
            return command.parse_result(stored)
        lease = None if self._relay is None else self._relay.committed_lease()
        try:
            async with self._repo.unit_of_work(outbox_lease=lease) as uow:
                await outcome.apply(uow)
                now = self._clock.now()
                await uow.add_outbox_many(outcome.events, now)
                result = outcome.result.model_dump(mode="json")
                await uow.record_command(command.command_id, result, now)
                # Reads older than this may predate a design change whose rollout has looked
                # for passes already (docs/templates.md): prepared again instead.
                if time.monotonic() - prepared_from > self._max_prepared_age:
                    raise ConcurrentUpdate(command.command_id)
        except OperationFailure as exc:
            if not is_duplicate(exc):
                raise
            # A concurrent replay of the same command committed first: answer with its result.
            stored = await self._repo.processed_result(command.command_id)
            if stored is None:
                raise
            return command.parse_result(stored)
        if isinstance(command, CreatePass):
            PASSES_ISSUED.labels(command.mode).inc()
        elif isinstance(command, CreatePasses):
            PASSES_ISSUED.labels(command.mode).inc(len(outcome.events))
        if outcome.events:
            if self._relay is not None:
                self._relay.publish_committed(uow.outbox_documents)
            self._on_commit()
        if outcome.after_commit is not None:
            await outcome.after_commit()
        return outcome.result

    def _check_sendable(self, outcome: Outcome) -> None:
        """Refuse, before anything is written, an outcome whose reply or events NATS could not
        carry: stored, they would answer a timeout or jam the outbox (issue 10, F01/F02)."""
        limit = self._message_limit()
        if limit is None:
            return
        room = limit - COMMAND_HEADROOM_BYTES
        sizes = [len(ok_reply(outcome.result))]
        sizes += [len(event.model_dump_json()) for event in outcome.events]
        if max(sizes) > room:
            raise PayloadTooLarge(
                f"The result would be {max(sizes)} bytes, more than the {room} bytes Tessera can "
                "carry between its services; send a smaller design (fewer or smaller images "
                "or localizations).",
                code="result_too_large",
            )

    async def _prepare(self, command: IssuerCommand) -> Outcome:
        match command:
            case CreateTemplate():
                return await self._create_template(command)
            case UpdateTemplate():
                return await self._update_template(command)
            case CreatePass():
                return await self._create_pass(command)
            case UpdatePass():
                return await self._update_pass(command)
            case VoidPass():
                return await self._void_pass(command)
            case RedactPass():
                return await self._redact_pass(command)
            case CreateDownloadLink():
                return await self._create_download_link(command)
            case CreatePasses():
                return await self._create_passes(command)
            case AddImportRows():
                return Outcome(*await self._jobs.add_import_rows(command))
            case StartJob():
                started = Outcome(*await self._jobs.start(command))
                started.after_commit = self._job_started
                return started
            case CancelJob():
                return Outcome(*await self._jobs.cancel(command))
            case RedeemPass():
                return Outcome(*await self._redemptions.redeem(command))
            case CreatePassBundle():
                return Outcome(*await self._bundles.create(command))
            case CreateUpdatePassesJob():
                job, apply = await plan_update(
                    self._repo, self._job_store, command, self._clock.now()
                )
                return Outcome(job, apply, after_commit=self._job_started)

    async def _job_started(self) -> None:
        self._on_job_started()

    async def _create_template(self, cmd: CreateTemplate) -> Outcome:
        # Off the event loop: validating decodes and re-encodes every image (Pillow).
        design = await asyncio.to_thread(
            validate_design, cmd.design, cmd.apple_style, cmd.template_type
        )
        now = self._clock.now()
        record = TemplateRecord.model_validate(
            {
                # Unguessable: its logo is public by its id (/t/{template_id}/logo.png).
                "_id": new_id("template", unguessable=True),
                "account_id": cmd.account_id,
                "mode": cmd.mode,
                "name": cmd.name,
                "type": cmd.template_type,
                "apple_style": cmd.apple_style,
                "design": design.model_dump(mode="json"),
                "require_download_link": cmd.require_download_link,
                "redemption": resolve_policy(cmd.template_type, cmd.redemption),
                "created_at": now,
                "updated_at": now,
            }
        )

        async def apply(uow: UnitOfWork) -> None:
            await uow.insert_template(record)

        return Outcome(result=record, apply=apply)

    async def _template_or_404(
        self, cmd: Any, template_id: str, param: str | None
    ) -> TemplateRecord:
        record = await self._repo.template(cmd.account_id, cmd.mode, template_id)
        if record is None:
            raise not_found("template", template_id, param)
        return record

    async def _update_template(self, cmd: UpdateTemplate) -> Outcome:
        record = await self._template_or_404(cmd, cmd.template_id, None)
        changes: dict[str, Any] = cmd.model_dump(
            include={"name", "archived", "require_download_link"}, exclude_none=True
        )
        if cmd.design is not None:
            design = await asyncio.to_thread(
                validate_design, cmd.design, record.apple_style, record.type
            )
            changes["design"] = design.model_dump(mode="json")
        if cmd.redemption is not None:
            changes["redemption"] = resolve_policy(record.type, cmd.redemption)
        now = self._clock.now()
        # The writes of the job the change starts (a rollout, or marking passes used).
        job_writes: Apply | None = None
        after_commit: Callable[[], Awaitable[None]] | None = None
        if changes.get("design", record.design) != record.design:
            # A new design_version, rolled out to the passes already issued (jobs/rollout.py).
            changes["design_version"] = record.design_version + 1
        updated = record.model_copy(update={**changes, "updated_at": now})
        if updated.design_version != record.design_version:
            job, job_writes, supersede = await plan_rollout(
                self._repo,
                self._job_store,
                record,
                updated,
                now,
                sweep_at=now + self._rollout_sweep,
            )
            updated.rollout_job_id = job.id
            after_commit = self._after_rollout_planned(supersede)
        elif _may_use_up(record.policy(), updated.policy()):
            # A lower limit: the passes redeemed that often already are marked used by a job
            # (a rollout marks them as it rebuilds every pass: jobs/rerender.py).
            job_writes = plan_mark_used(self._repo, self._job_store, updated, now)
            if job_writes is not None:
                after_commit = self._job_started
        google_classes = self._google_classes if "design_version" in changes else None

        async def apply(uow: UnitOfWork) -> None:
            await uow.replace_template_at(updated, record)
            if google_classes is not None:  # the class is upserted by the Google step
                await google_classes.mark_class_due(updated, now, uow.session)
            before, after = record.policy(), updated.policy()
            if (before.max_redemptions, before.on_limit) != (after.max_redemptions, after.on_limit):
                await self._scan_store.set_policy(updated, uow.session)
            if job_writes is not None:
                await job_writes(uow)

        return Outcome(result=updated, apply=apply, after_commit=after_commit)

    def _after_rollout_planned(
        self, supersede: Callable[[], Awaitable[None]]
    ) -> Callable[[], Awaitable[None]]:
        """Once a rollout's PATCH committed: the previous rollout superseded, the worker woken."""

        async def after() -> None:
            await supersede()
            await self._job_started()

        return after

    async def _create_pass(self, cmd: CreatePass) -> Outcome:
        template = await self._maker.template(cmd.account_id, cmd.mode, cmd.template_id)
        design = Design.from_stored(template.design)
        record = new_pass(
            template,
            design,
            cmd,
            account_id=cmd.account_id,
            mode=cmd.mode,
            created_via_api=cmd.created_via_api,
            now=self._clock.now(),
        )
        return await self._store_pass(record, template, design, "created", {}, insert=True)

    async def _create_passes(self, cmd: CreatePasses) -> Outcome:
        """A batch: each row prepared on its own, the passes written together (bulk.py)."""
        check_batch_bundle(cmd)
        results: dict[int, BatchRowResult] = {}
        made: list[NewPass] = []
        for template_id in dict.fromkeys(row.template_id for row in cmd.rows):
            rows = [(row.index, row) for row in cmd.rows if row.template_id == template_id]
            try:
                template = await self._maker.template(cmd.account_id, cmd.mode, template_id)
                refusal = hidden_refusal(template, "template_id") if cmd.bundle else None
                if refusal is not None:
                    raise refusal
            except ApiError as exc:
                if exc.status >= 500:
                    raise
                error: RowError = row_error(exc)
                results.update(
                    (index, BatchRowResult(index=index, error=error)) for index, _ in rows
                )
                continue
            prepared = await self._maker.prepare(
                template,
                rows,
                account_id=cmd.account_id,
                mode=cmd.mode,
                created_via_api=cmd.created_via_api,
            )
            for index, row_failure in prepared.errors.items():
                results[index] = BatchRowResult(index=index, error=row_failure)
            made += prepared.passes
        for new in made:
            results[new.key] = BatchRowResult(index=new.key, record=new.record)
        rows_out = [results[row.index] for row in cmd.rows]
        bundle = batch_bundle(cmd, rows_out, self._clock.now())

        async def apply(uow: UnitOfWork) -> None:
            if made:
                await uow.insert_new_passes([(new.record, new.file) for new in made])
            if bundle is not None:
                await self._bundles.insert(bundle, uow.session)

        result = PassesCreated(rows=rows_out, bundle=bundle)
        return Outcome(result, apply, events=[new.event for new in made])

    async def _pass_or_404(
        self, cmd: UpdatePass | VoidPass | RedactPass | CreateDownloadLink
    ) -> PassRecord:
        record = await self._repo.pass_(cmd.account_id, cmd.mode, cmd.pass_id)
        if record is None:
            raise not_found("pass", cmd.pass_id)
        return record

    async def _update_pass(self, cmd: UpdatePass) -> Outcome:
        record = await self._pass_or_404(cmd)
        if record.voided:
            raise pass_voided(record.id)
        template = await self._template_or_404(cmd, record.template_id, None)
        design = Design.from_stored(template.design)
        check_field_values(design, cmd.field_values or {})
        field_values = merged(record.field_values, cmd.field_values or {})
        metadata = merged(record.metadata, cmd.metadata or {})
        # A PATCH adds to what is stored: the limits hold for the merged pass (F10).
        check_pass_limits(field_values, metadata)
        check_metadata_dates(metadata)
        # Moving to a newer design, every value its barcodes show is checked: a rollout kept
        # this pass back because they cannot carry them (docs/templates.md#barcodes).
        shown = None if moves_design(record, template) else cmd.field_values or {}
        check_barcode_fits(design, field_values, changed=shown)
        holder = cmd.holder or {}
        updated = record.model_copy(
            update={
                **holder,
                "field_values": field_values,
                "metadata": metadata,
                "version": record.version + 1,
                "design_version": template.design_version,
                "updated_at": self._clock.now(),
            }
        )
        # The names of what changed, never the values: events are kept and sent on.
        changed = {
            "stage": "pushed",
            "field_values": sorted(cmd.field_values or {}),
            "metadata": sorted(cmd.metadata or {}),
        }
        if holder:
            changed["holder"] = sorted(holder)
        return await self._store_pass(updated, template, design, "updated", changed, insert=False)

    async def _redact_pass(self, cmd: RedactPass) -> Outcome:
        """Erase the holder's data, field values and metadata, void the pass, rebuild its file
        without them, and erase the issuer's own copies in the same transaction (stored
        command results, scan records). The `voided` event (reason "redacted") tells the
        events and webhooks services to erase theirs (docs/privacy.md)."""
        record = await self._pass_or_404(cmd)
        template = await self._template_or_404(cmd, record.template_id, None)
        now = self._clock.now()
        redacted = record.model_copy(
            update={
                "holder_email": None,
                "holder_name": None,
                "field_values": {},
                "metadata": {},
                # A hash of an object made from the holder's data (docs/google-wallet.md)
                "google_object_digest": None,
                "voided": True,
                "voided_at": record.voided_at or now,
                "version": record.version + 1,
                "design_version": template.design_version,
                "updated_at": now,
            }
        )
        design = Design.from_stored(template.design)
        # Whatever the template's images: an erasure request must succeed.
        outcome = await self._store_pass(
            redacted,
            template,
            design,
            "voided",
            {"reason": "redacted"},
            insert=False,
            images_optional=True,
        )
        store = outcome.apply

        async def apply(uow: UnitOfWork) -> None:
            await store(uow)
            await uow.erase_pass_copies(record.id, record.barcode_message, record.account_id)
            await self._scan_store.erase_pass_copy(record, uow.session)

        outcome.apply = apply
        return outcome

    async def _void_pass(self, cmd: VoidPass) -> Outcome:
        record = await self._pass_or_404(cmd)
        if record.voided:
            # Voiding twice answers the voided pass and records nothing new.
            async def nothing(uow: UnitOfWork) -> None:
                return None

            return Outcome(result=record, apply=nothing)
        template = await self._template_or_404(cmd, record.template_id, None)
        now = self._clock.now()
        updated = record.model_copy(
            update={
                "voided": True,
                "voided_at": now,
                "version": record.version + 1,
                "design_version": template.design_version,
                "updated_at": now,
            }
        )
        design = Design.from_stored(template.design)
        return await self._store_pass(
            updated, template, design, "voided", {}, insert=False, images_optional=True
        )

    async def _create_download_link(self, cmd: CreateDownloadLink) -> Outcome:
        record = await self._pass_or_404(cmd)
        if record.voided:
            raise InvalidRequest(
                f"Pass '{record.id}' is voided; a download link to it would be useless.",
                code="pass_voided",
            )
        link = DownloadLinkRecord.model_validate(
            {
                "_id": new_id("download_link"),
                "account_id": cmd.account_id,
                "mode": cmd.mode,
                "pass_id": record.id,
                "token_hash": cmd.token_hash,
                "expires_in": cmd.expires_in,
                "expires_at": cmd.expires_at,
                "created_at": cmd.created_at,
            }
        )

        async def apply(uow: UnitOfWork) -> None:
            await uow.insert_download_link(link)

        return Outcome(result=link, apply=apply)

    async def _store_pass(
        self,
        record: PassRecord,
        template: TemplateRecord,
        design: Design,
        event_type: PassEventType,
        event_metadata: dict[str, Any],
        *,
        insert: bool,
        images_optional: bool = False,
    ) -> Outcome:
        if at_limit_unmarked(record, template.policy()):
            record.used_up = True  # its limit was lowered below its count (docs/redemption.md)
        signed = await self._artifacts.signed_pass(
            record, template, design, images_optional=images_optional
        )
        # Every version of a pass has a Google link (signed when asked); with real credentials
        # its object is upserted after the commit by the Google step (a voided pass turns
        # INACTIVE).
        self._artifacts.attach_google(record)
        identity = self._identities.apple
        # Stored before the transaction, and never deleted: a pass file never refers to
        # assets that are not there.
        await self._repo.store_assets(signed.assets.id, signed.assets.files, record.updated_at)
        pkpass = PassFile(
            version=record.version,
            pass_json=signed.pass_json,
            manifest=signed.manifest,
            signature=signed.signature,
            assets_id=signed.assets.id,
            pass_type_identifier=identity.pass_type_identifier,
            last_modified=await self._last_modified(record, insert=insert),
        )
        record.file_modified_at = pkpass.last_modified
        event = pass_event(record, event_type, event_metadata, record.updated_at)
        record.barcode_message = barcode_message(design, record)
        record.redemption_limit = template.policy().max_redemptions
        record.redemption_on_limit = template.policy().on_limit

        async def apply(uow: UnitOfWork) -> None:
            if insert:
                await uow.insert_pass(record)
            else:
                await uow.replace_pass(record, expected_version=record.version - 1)
            await uow.store_pass_file(record.id, pkpass, record.updated_at)

        # The events service publishes it once the pass's devices are pushed.
        live = event_type in LIVE_UPDATE_EVENT_TYPES
        return Outcome(record, apply, events=[LiveUpdate(event=event) if live else event])

    async def _last_modified(self, record: PassRecord, *, insert: bool) -> datetime:
        # Read in the prepare phase: a command retried after a conflict reads it afresh.
        previous = None if insert else await self._repo.file_stamp(record)
        return last_modified_after(record.updated_at, previous)
