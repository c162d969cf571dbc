"""The `google_save_link` query: a pass's Google Wallet save link, signed when a holder asks.

Signing a save link costs about as much CPU as building the pass's .pkpass (an RSA signature
over the whole Google object, in a fat link). Issuance, updates and rollouts therefore only mark
a pass as having one (`google_save_url` = ""), and the api's `/google` redirect asks for the link
here; a link signed now also carries the pass as it is now (docs/google-wallet.md).
"""

from services.issuer.artifacts import WalletArtifacts
from services.issuer.repository import IssuerRepository
from shared.errors import not_found
from shared.messages import GoogleSaveLink, SignGoogleSaveLink


class GoogleLinks:
    def __init__(self, repo: IssuerRepository, artifacts: WalletArtifacts):
        self._repo = repo
        self._artifacts = artifacts

    async def sign(self, query: SignGoogleSaveLink) -> GoogleSaveLink:
        """The link of the query's pass (in its account and mode); 404 for an unknown pass or
        one with no Google Wallet."""
        record = await self._repo.pass_(query.account_id, query.mode, query.pass_id)
        template = (
            None
            if record is None
            else await self._repo.template(query.account_id, query.mode, record.template_id)
        )
        url = (
            None
            if record is None or template is None
            else self._artifacts.save_link(template, record)
        )
        if url is None:
            raise not_found("pass", query.pass_id, param="id")
        return GoogleSaveLink(url=url)
