"""The signing identities of the issuer: Apple's (shared/apple_identity.py, which the events
service loads too, for APNs) and Google's, configured or generated.

Without configured credentials the issuer generates development identities under
`{data_dir}/signing/` on first start. Which identity signs which mode:
- configured credentials sign both test-mode and live-mode passes;
- development identities sign test-mode passes only: a live-mode pass needs the real Apple
  identity, and without it issuing one answers 403 authorization_error (code
  `live_signing_not_configured`) instead of producing a pass no wallet would accept. Without
  real Google credentials a live pass is issued with no Google Wallet link (a link signed by
  the development identity would only show an error): each wallet is enabled by its own
  credentials (docs/api-decisions.md#live-mode-with-one-wallet).

An Apple identity whose passes would not verify (a WWDR intermediate that did not issue the
pass certificate, an expired certificate) raises SigningIdentityError, which stops the start
(services/issuer/__main__.py); one that ends within 30 days is watched (signing_expiry.py).
"""

from dataclasses import dataclass

from services.issuer.config import IssuerSettings
from services.issuer.google.identity import GoogleIdentity, configured_google_identity
from shared.apple_identity import SigningIdentity, load_apple_identity


@dataclass(frozen=True)
class Identities:
    apple: SigningIdentity
    apple_is_development: bool
    google: GoogleIdentity

    @property
    def live_ready(self) -> bool:
        """Live passes need production Apple credentials (the .pkpass is the pass); Google's
        are optional: without them live passes get no Google Wallet link."""
        return not self.apple_is_development

    @property
    def google_live(self) -> bool:
        """Whether live passes get a Google Wallet link (production Google credentials)."""
        return not self.google.is_development

    def missing_for_live(self) -> list[str]:
        return ["Apple Wallet"] if self.apple_is_development else []


def load_identities(settings: IssuerSettings) -> Identities:
    return Identities(
        apple=load_apple_identity(settings),
        apple_is_development=not settings.apple_configured,
        google=configured_google_identity(
            service_account_path=settings.google_service_account_path,
            issuer_id=settings.google_issuer_id,
            dev_directory=settings.data_dir / "signing",
        ),
    )
