"""A pass in Google Wallet: its save link, and the class and object Google stores.

With a REST client (real credentials), the link is skinny (ids only), as Google recommends, and
the class and object are upserted through the Wallet API by a separate, retried step
(google/sync.py), so Apple issuance never waits on Google. Without one (the development
identity, which Google does not know), the link is fat: it carries the class and the object.
"""

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from services.issuer.content import metadata_dates
from services.issuer.google.client import WalletRestClient
from services.issuer.google.identity import GoogleIdentity
from services.issuer.google.objects import build_class, build_object, vertical_for
from services.issuer.google.savelink import object_reference, save_url
from shared.design import Design
from shared.models import PassRecord, TemplateRecord


@dataclass(frozen=True)
class GoogleWallet:
    """What issuing to Google Wallet needs; `client` is None for the development identity."""

    identity: GoogleIdentity
    client: WalletRestClient | None
    origins: list[str]  # e.g. [site_url]
    placeholder_logo_url: str | None = None  # for loyalty classes whose template has no logo
    callback_url: str | None = None  # the classes' callbackOptions.url (the events service)


def save_link(
    wallet: GoogleWallet,
    template: TemplateRecord,
    pass_record: PassRecord,
    *,
    logo_url: str | None = None,
    now: datetime | None = None,
) -> str:
    """The "Add to Google Wallet" link of a pass, made here without calling Google: skinny
    (ids only) with a REST client when the Google sync step upserted this very object
    (google/sync.py: its digest is the one stored); fat (class and object inside) without a
    client, and otherwise: a new pass, a bulk import's thousands waiting their turn, a class
    not yet inserted, an issuer id changed since (another object id), for which ids alone
    would open Google's error page. Google saves an object that exists as it is at Google,
    whatever a fat link carries."""
    vertical = vertical_for(template.type)
    resource_class, resource = resources(wallet, template, pass_record, logo_url=logo_url)
    at_google = pass_record.google_object_digest == digest(resource)
    if wallet.client is None or not at_google:
        return save_url(
            wallet.identity,
            origins=wallet.origins,
            vertical=vertical,
            objects=[resource],
            classes=[resource_class],
            now=now,
        )
    return save_url(
        wallet.identity,
        origins=wallet.origins,
        vertical=vertical,
        objects=[object_reference(resource)],
        now=now,
    )


async def sync_object(
    wallet: GoogleWallet,
    template: TemplateRecord,
    pass_record: PassRecord,
    *,
    logo_url: str | None = None,
) -> str | None:
    """Insert or update the pass's object as it is now (idempotent by the object's id); the
    digest of what was sent. A no-op without a client (None)."""
    if wallet.client is None:
        return None
    _resource_class, resource = resources(wallet, template, pass_record, logo_url=logo_url)
    await wallet.client.upsert_object(vertical_for(template.type), resource)
    return digest(resource)


def object_digest(
    wallet: GoogleWallet,
    template: TemplateRecord,
    pass_record: PassRecord,
    *,
    logo_url: str | None = None,
) -> str:
    """The digest of the pass's object as `sync_object` would send it now."""
    return digest(resources(wallet, template, pass_record, logo_url=logo_url)[1])


def digest(resource: dict[str, Any]) -> str:
    canonical = json.dumps(resource, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


async def sync_template(
    wallet: GoogleWallet, template: TemplateRecord, *, logo_url: str | None = None
) -> None:
    """Push a changed template (design) to its class; a no-op without a client."""
    if wallet.client is None:
        return
    design = Design.from_stored(template.design)
    resource_class = _class(wallet, template, design, logo_url)
    await wallet.client.upsert_class(vertical_for(template.type), resource_class)


def resources(
    wallet: GoogleWallet,
    template: TemplateRecord,
    pass_record: PassRecord,
    *,
    logo_url: str | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The class of `template` and the object of `pass_record`."""
    design = Design.from_stored(template.design)
    resource = build_object(
        identity=wallet.identity,
        template_id=template.id,
        template_type=template.type,
        design=design,
        pass_id=pass_record.id,
        serial_number=pass_record.serial_number,
        short_id=pass_record.short_id,
        field_values=pass_record.field_values,
        holder_name=pass_record.holder_name,
        holder_email=pass_record.holder_email,
        voided=pass_record.voided,
        completed=pass_record.used_up,
        logo_url=logo_url,
        # The pass's own date (metadata) before its design's, as in pass.json.
        expiration_date=(
            metadata_dates(pass_record.metadata, strict=False).expiration_date
            or design.expiration_date
        ),
    )
    return _class(wallet, template, design, logo_url), resource


def _class(
    wallet: GoogleWallet, template: TemplateRecord, design: Design, logo_url: str | None
) -> dict[str, Any]:
    return build_class(
        identity=wallet.identity,
        template_id=template.id,
        template_type=template.type,
        design=design,
        logo_url=logo_url,
        placeholder_logo_url=wallet.placeholder_logo_url,
        callback_url=wallet.callback_url,
    )
