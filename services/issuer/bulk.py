"""Many passes at once: the rows of POST /v1/passes/batch and the chunks of import jobs.

Every row is prepared on its own (checked, rendered, signed: a refusal fails that row alone,
with the error POST /v1/passes would have answered), then the rows that succeeded are written
together in the caller's one transaction: one insert_many each for passes, pass files and
outbox events, so a chunk of 100 costs a handful of round trips, not 100 times the dozen of
single creates. A row is made once because its batch or chunk commits once (the batch's
command id, the chunk's guarded commit). A failure that is not the row's fault (Google
unavailable, the store) raises: the whole batch or chunk is tried again, and nothing of it was
written.
"""

import asyncio
import secrets
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from services.issuer.artifacts import WalletArtifacts
from services.issuer.assets import PassAssets, pass_assets
from services.issuer.pkpass import sign_pass
from services.issuer.redemption import barcode_message
from services.issuer.repository import IssuerRepository, PassFile, UnitOfWork, last_modified_after
from services.issuer.template_cache import TemplateCache
from shared.clock import Clock
from shared.design import Design
from shared.errors import ApiError, AuthorizationError, InvalidRequest, not_found
from shared.ids import new_id, short_slug
from shared.messages import CreatePass, PassEventMessage, PassRow
from shared.metrics import PKPASS_BUILD
from shared.models import Mode, PassRecord, RowError, TemplateRecord, row_error
from shared.pass_events import pass_event
from shared.pass_values import check_pass_values


def issuable(
    template: TemplateRecord | None, template_id: str, mode: Mode, artifacts: WalletArtifacts
) -> TemplateRecord:
    """The template passes may be issued from, or the error POST /v1/passes answers."""
    if template is None:
        raise not_found("template", template_id, "template_id")
    if template.archived:
        raise InvalidRequest(
            f"Template '{template.id}' is archived; no new passes can be issued from it.",
            param="template_id",
            code="template_archived",
        )
    identities = artifacts.identities
    if mode == "live" and not identities.live_ready:
        missing = " and ".join(identities.missing_for_live())
        raise AuthorizationError(
            f"Live passes cannot be issued: this Tessera has no production {missing} "
            "credentials. Use a test key, or ask the operator to configure them.",
            code="live_signing_not_configured",
        )
    return template


def new_pass(
    template: TemplateRecord,
    design: Design,
    row: PassRow | CreatePass,
    *,
    account_id: str,
    mode: Mode,
    created_via_api: bool,
    now: datetime,
) -> PassRecord:
    """A checked, new pass record of `template` (the checks raise the row's ApiError)."""
    check_pass_values(design, row.field_values, row.metadata)
    record = PassRecord.model_validate(
        {
            "_id": new_id("pass"),
            "account_id": account_id,
            "mode": mode,
            # 95 random bits: a collision is practically impossible, and the unique index
            # on short_id refuses one (the command fails; a retry draws another), so no
            # lookup round trip is spent on it.
            "short_id": short_slug(),
            "template_id": template.id,
            "serial_number": str(uuid.uuid4()),
            "holder_email": row.holder_email,
            "holder_name": row.holder_name,
            "field_values": row.field_values,
            "metadata": row.metadata,
            "created_via_api": created_via_api,
            "authentication_token": secrets.token_urlsafe(24),
            "design_version": template.design_version,
            "redemption_limit": template.policy().max_redemptions,
            "redemption_on_limit": template.policy().on_limit,
            "created_at": now,
            "updated_at": now,
        }
    )
    # What a scanned code is looked up by (services/issuer/scans.py).
    record.barcode_message = barcode_message(design, record)
    return record


@dataclass(frozen=True)
class NewPass:
    """A row ready to be written: the pass, its signed file and its `created` event."""

    key: int  # the row's index (batch) or number (import)
    record: PassRecord
    file: PassFile
    event: PassEventMessage


@dataclass
class Prepared:
    passes: list[NewPass]
    errors: dict[int, RowError]

    async def write(self, uow: UnitOfWork) -> None:
        """The new passes and their files, in `uow` (their events go to the outbox with the
        caller's other events)."""
        if self.passes:
            await uow.insert_new_passes([(p.record, p.file) for p in self.passes])


class PassMaker:
    """Prepares rows into passes for one account and mode."""

    def __init__(
        self,
        repo: IssuerRepository,
        artifacts: WalletArtifacts,
        clock: Clock,
        templates: TemplateCache | None = None,
    ):
        self._repo = repo
        self._artifacts = artifacts
        self._clock = clock
        self._templates = templates

    async def template(self, account_id: str, mode: Mode, template_id: str) -> TemplateRecord:
        """The template rows are issued from; raises what POST /v1/passes would answer."""
        if self._templates is None:
            record = await self._repo.template(account_id, mode, template_id)
        else:
            record = await self._templates.template(self._repo, account_id, mode, template_id)
        return issuable(record, template_id, mode, self._artifacts)

    async def prepare(
        self,
        template: TemplateRecord,
        rows: Sequence[tuple[int, PassRow]],
        *,
        account_id: str,
        mode: Mode,
        created_via_api: bool = True,
    ) -> Prepared:
        """Each row checked, rendered and signed; a row's own error fails that row alone."""
        design = Design.from_stored(template.design)
        now = self._clock.now()
        try:
            # The files every pass of the design shares, once for all rows (off the event
            # loop: the first build of a design cleans its images).
            assets = await asyncio.to_thread(pass_assets, design, template.apple_style)
        except ValueError as exc:
            error = InvalidRequest(
                f"Template '{template.id}' has an image Wallet cannot use: {exc}. Replace "
                f"it with PATCH /v1/templates/{template.id}.",
                code="template_image_invalid",
            )
            return Prepared(passes=[], errors={key: row_error(error) for key, _ in rows})
        await self._repo.store_assets(assets.id, assets.files, now)
        # Rendering and signing are CPU work: done off the event loop, so that the loop goes
        # on with the replica's other commands and chunks meanwhile (the RSA signatures
        # release the GIL part of the time; the rest yields it every switch interval).
        return await asyncio.to_thread(
            self._prepare_rows,
            template,
            design,
            assets,
            rows,
            account_id=account_id,
            mode=mode,
            created_via_api=created_via_api,
            now=now,
        )

    def _prepare_rows(
        self,
        template: TemplateRecord,
        design: Design,
        assets: PassAssets,
        rows: Sequence[tuple[int, PassRow]],
        *,
        account_id: str,
        mode: Mode,
        created_via_api: bool,
        now: datetime,
    ) -> Prepared:
        prepared = Prepared(passes=[], errors={})
        for key, row in rows:
            try:
                record = new_pass(
                    template,
                    design,
                    row,
                    account_id=account_id,
                    mode=mode,
                    created_via_api=created_via_api,
                    now=now,
                )
                prepared.passes.append(self._signed(key, record, template, design, assets))
            except ApiError as exc:
                if exc.status >= 500:
                    raise  # not the row's fault: the whole batch is tried again
                prepared.errors[key] = row_error(exc)
        return prepared

    def _signed(
        self,
        key: int,
        record: PassRecord,
        template: TemplateRecord,
        design: Design,
        assets: PassAssets,
    ) -> NewPass:
        content = self._artifacts.content(record, template, design)
        with PKPASS_BUILD.time():
            signed = sign_pass(content, self._artifacts.identities.apple, assets)
        self._artifacts.attach_google(record)
        file = PassFile(
            version=record.version,
            pass_json=signed.pass_json,
            manifest=signed.manifest,
            signature=signed.signature,
            assets_id=signed.assets.id,
            pass_type_identifier=self._artifacts.identities.apple.pass_type_identifier,
            last_modified=last_modified_after(record.updated_at, None),
        )
        record.file_modified_at = file.last_modified
        event = pass_event(record, "created", {}, record.updated_at)
        return NewPass(key, record, file, event)
