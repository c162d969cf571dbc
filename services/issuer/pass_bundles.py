"""Pass bundles: the passes of one order offered together (docs/api-decisions.md#pass-bundles).

A bundle is a list of pass ids in the `pass_bundles` collection, made by `CreatePassBundle` or
by a batch with `bundle: true`, and never changed; the api serves its landing page and its
.pkpasses from the passes' current files. Its URLs are permanent URLs of each of its passes, so
a pass whose template requires download links (spec 4.1 rule 6) cannot join one, and a voided
pass cannot either (nobody would add it to a wallet).
"""

from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime

from pydantic import BaseModel
from pymongo.asynchronous.client_session import AsyncClientSession

from services.issuer.repository import IssuerRepository, UnitOfWork
from shared.clock import Clock
from shared.errors import ApiError, InvalidRequest, not_found
from shared.ids import new_id
from shared.messages import (
    BatchRowResult,
    CreatePassBundle,
    CreatePasses,
    LiveUpdate,
    PassEventMessage,
)
from shared.models import MAX_BUNDLE_PASSES, Mode, PassBundleRecord, TemplateRecord

Apply = Callable[[UnitOfWork], Awaitable[None]]
Prepared = tuple[BaseModel, Apply, list[PassEventMessage | LiveUpdate]]


def hidden_refusal(template: TemplateRecord, param: str) -> ApiError | None:
    """Why a pass of `template` may not be in a bundle, or None."""
    if not template.require_download_link:
        return None
    return InvalidRequest(
        f"Template '{template.id}' requires download links, so its passes cannot be reached "
        "through a bundle's permanent URLs; send each holder a download link instead.",
        param=param,
        code="download_link_required",
    )


def check_batch_bundle(cmd: CreatePasses) -> None:
    if cmd.bundle and len(cmd.rows) > MAX_BUNDLE_PASSES:
        raise InvalidRequest(
            f"A bundle holds at most {MAX_BUNDLE_PASSES} passes; send at most "
            f"{MAX_BUNDLE_PASSES} rows with bundle: true.",
            param="bundle",
            code="parameter_invalid",
        )


def batch_bundle(
    cmd: CreatePasses, rows: Sequence[BatchRowResult], now: datetime
) -> PassBundleRecord | None:
    """With `bundle`, the bundle of the passes the batch made, in row order (None without, or
    when no row made one)."""
    pass_ids = [row.record.id for row in rows if row.record is not None]
    if not cmd.bundle or not pass_ids:
        return None
    return new_bundle(cmd.account_id, cmd.mode, pass_ids, now)


def new_bundle(
    account_id: str, mode: Mode, pass_ids: Sequence[str], now: datetime
) -> PassBundleRecord:
    return PassBundleRecord.model_validate(
        {
            # The id opens the bundle's public page: every random bit kept.
            "_id": new_id("pass_bundle", unguessable=True),
            "account_id": account_id,
            "mode": mode,
            "pass_ids": list(pass_ids),
            "created_at": now,
        }
    )


class PassBundles:
    def __init__(self, repo: IssuerRepository, clock: Clock):
        self._repo = repo
        self._bundles = repo.db["pass_bundles"]
        self._clock = clock

    async def insert(self, record: PassBundleRecord, session: AsyncClientSession) -> None:
        await self._bundles.insert_one(record.to_document(), session=session)

    async def create(self, cmd: CreatePassBundle) -> Prepared:
        """Check every id (its param is `pass_ids.<i>`), then prepare the insert."""
        if not 1 <= len(cmd.pass_ids) <= MAX_BUNDLE_PASSES:
            raise InvalidRequest(
                f"Send 1 to {MAX_BUNDLE_PASSES} pass ids.",
                param="pass_ids",
                code="parameter_invalid",
            )
        for index, pass_id in enumerate(cmd.pass_ids):
            if pass_id in cmd.pass_ids[:index]:
                raise InvalidRequest(
                    f"Pass '{pass_id}' is in the list twice.",
                    param=f"pass_ids.{index}",
                    code="parameter_invalid",
                )
        passes = await self._repo.passes_by_id(cmd.account_id, cmd.mode, cmd.pass_ids)
        templates: dict[str, TemplateRecord | None] = {}
        for index, pass_id in enumerate(cmd.pass_ids):
            param = f"pass_ids.{index}"
            record = passes.get(pass_id)
            if record is None:
                raise not_found("pass", pass_id, param)
            if record.voided:
                raise InvalidRequest(
                    f"Pass '{pass_id}' is voided; it cannot be added to a wallet.",
                    param=param,
                    code="pass_voided",
                )
            if record.template_id not in templates:
                templates[record.template_id] = await self._repo.template(
                    cmd.account_id, cmd.mode, record.template_id
                )
            template = templates[record.template_id]
            refusal = None if template is None else hidden_refusal(template, param)
            if refusal is not None:
                raise refusal
        bundle = new_bundle(cmd.account_id, cmd.mode, cmd.pass_ids, self._clock.now())

        async def apply(uow: UnitOfWork) -> None:
            await self.insert(bundle, uow.session)

        return bundle, apply, []
