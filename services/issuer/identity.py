"""The signing identities of the issuer: Apple's (shared/apple_identity.py, which the events
service loads too, for APNs) and Google's, configured or generated.

Without configured credentials the issuer generates development identities under
`{data_dir}/signing/` on first start. Which identity signs which mode:
- configured credentials sign both test-mode and live-mode passes;
- development identities sign test-mode passes only: a live-mode pass needs both real
  identities, and without them issuing one answers 403 authorization_error
  (code `live_signing_not_configured`) instead of producing a pass no wallet would accept.

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
        return not self.apple_is_development and not self.google.is_development

    def missing_for_live(self) -> list[str]:
        missing = ["Apple Wallet"] if self.apple_is_development else []
        return missing + (["Google Wallet"] if self.google.is_development else [])


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
