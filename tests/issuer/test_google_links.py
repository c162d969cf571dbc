"""The `google_save_link` query against the real store: the link is signed when asked, from the
pass as it is then, verifies with the Google identity's public key (google-auth), is refused for
a pass that is not the asker's or has no Google Wallet, and writes nothing."""

import base64
import json
import uuid
from typing import Any

import pytest
from google.auth import crypt

from services.issuer.artifacts import WalletArtifacts
from services.issuer.google_links import GoogleLinks
from services.issuer.repository import IssuerRepository
from services.issuer.service import IssuerService
from shared.errors import NotFound
from shared.messages import CreatePass, SignGoogleSaveLink, UpdatePass
from shared.models import PassRecord, TemplateRecord
from tests.support.issuer import ACCOUNT, command_base, template_command


def _query(pass_id: str, account: str = ACCOUNT) -> SignGoogleSaveLink:
    return SignGoogleSaveLink(
        command_id=str(uuid.uuid4()), account_id=account, mode="test", pass_id=pass_id
    )


async def _pass(service: IssuerService) -> PassRecord:
    template = await service.handle(template_command())
    assert isinstance(template, TemplateRecord)
    command = CreatePass(**command_base(), template_id=template.id, field_values={"seat": "A1"})
    record = await service.handle(command)
    assert isinstance(record, PassRecord)
    return record


def _verified_payload(url: str, artifacts: WalletArtifacts) -> dict[str, Any]:
    """The JWT's payload, after google-auth checked its signature."""
    signed, _, signature = url.rsplit("/", 1)[1].rpartition(".")
    verifier = crypt.RSAVerifier.from_string(artifacts.identities.google.public_key_pem())
    assert verifier.verify(signed.encode(), base64.urlsafe_b64decode(signature + "=="))
    claims = signed.split(".")[1]
    payload: dict[str, Any] = json.loads(base64.urlsafe_b64decode(claims + "=="))["payload"]
    return payload


def _object_text(payload: dict[str, Any]) -> str:
    (event_object,) = payload["eventTicketObjects"]
    return json.dumps(event_object)


async def test_the_link_is_signed_when_asked_from_the_pass_as_it_is_then(
    service: IssuerService, repo: IssuerRepository, artifacts: WalletArtifacts
) -> None:
    created = await _pass(service)
    assert created.google_save_url == ""  # issuance signs no link: it only says there is one
    links = GoogleLinks(repo, artifacts)

    first = await links.sign(_query(created.id))
    assert first.url.startswith("https://pay.google.com/gp/v/save/")
    assert '"A1"' in _object_text(_verified_payload(first.url, artifacts))

    await service.handle(
        UpdatePass(**command_base(), pass_id=created.id, field_values={"seat": "B2"})
    )
    later = await links.sign(_query(created.id))
    now = _object_text(_verified_payload(later.url, artifacts))
    assert '"B2"' in now
    assert '"A1"' not in now


async def test_asking_writes_nothing(
    service: IssuerService, repo: IssuerRepository, artifacts: WalletArtifacts
) -> None:
    created = await _pass(service)
    before = {name: await repo.db[name].count_documents({}) for name in ("processed_commands",)}

    await GoogleLinks(repo, artifacts).sign(_query(created.id))

    after = {name: await repo.db[name].count_documents({}) for name in ("processed_commands",)}
    assert after == before


async def test_another_accounts_an_unknown_or_a_google_less_pass_is_not_found(
    service: IssuerService, repo: IssuerRepository, artifacts: WalletArtifacts
) -> None:
    created = await _pass(service)
    links = GoogleLinks(repo, artifacts)

    with pytest.raises(NotFound):
        await links.sign(_query(created.id, account="acct_someone_else"))
    with pytest.raises(NotFound):
        await links.sign(_query("pass_0Mx3ZyXwVuTsRqPoNmLkJi"))
    # A live pass issued with Apple credentials only has no Google Wallet link.
    await repo.passes.update_one({"_id": created.id}, {"$set": {"google_save_url": None}})
    with pytest.raises(NotFound):
        await links.sign(_query(created.id))
