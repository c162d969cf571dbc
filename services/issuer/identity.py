"""The signing identities of the issuer: Apple's and Google's, configured or generated.

Without configured credentials the issuer generates development identities under
`{data_dir}/signing/` on first start. Which identity signs which mode:
- configured credentials sign both test-mode and live-mode passes;
- development identities sign test-mode passes only: a live-mode pass needs both real
  identities, and without them issuing one answers 403 authorization_error
  (code `live_signing_not_configured`) instead of producing a pass no wallet would accept.
"""

from dataclasses import dataclass

from services.issuer.config import IssuerSettings
from services.issuer.google.identity import GoogleIdentity, configured_google_identity
from services.issuer.signing import (
    SigningIdentity,
    ensure_dev_identity,
    load_identity,
    load_identity_pkcs12,
)


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


def apple_identity(settings: IssuerSettings) -> SigningIdentity:
    ids = {
        "pass_type_identifier": settings.pass_type_identifier,
        "team_identifier": settings.team_identifier,
    }
    if not settings.apple_configured:
        return ensure_dev_identity(settings.data_dir / "signing", **ids)
    assert settings.apple_wwdr_certificate_path is not None  # enforced by IssuerSettings
    wwdr = settings.apple_wwdr_certificate_path.read_bytes()
    password = settings.apple_private_key_password
    secret = password.encode() if password else None
    if settings.apple_pkcs12_path is not None:
        p12 = settings.apple_pkcs12_path.read_bytes()
        return load_identity_pkcs12(p12=p12, password=secret, wwdr_pem=wwdr, **ids)
    assert settings.apple_certificate_path
    assert settings.apple_private_key_path
    return load_identity(
        certificate_pem=settings.apple_certificate_path.read_bytes(),
        private_key_pem=settings.apple_private_key_path.read_bytes(),
        key_password=secret,
        wwdr_pem=wwdr,
        **ids,
    )


def load_identities(settings: IssuerSettings) -> Identities:
    return Identities(
        apple=apple_identity(settings),
        apple_is_development=not settings.apple_configured,
        google=configured_google_identity(
            service_account_path=settings.google_service_account_path,
            issuer_id=settings.google_issuer_id,
            dev_directory=settings.data_dir / "signing",
        ),
    )
