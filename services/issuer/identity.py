"""Chooses the Apple signing identity: the configured one, or the generated development one."""

from services.issuer.config import IssuerSettings
from services.issuer.signing import SigningIdentity, ensure_dev_identity, load_identity


def signing_identity(settings: IssuerSettings) -> SigningIdentity:
    if settings.apple_certificate_path is None or settings.apple_private_key_path is None:
        return ensure_dev_identity(
            settings.data_dir / "signing",
            pass_type_identifier=settings.pass_type_identifier,
            team_identifier=settings.team_identifier,
        )
    assert settings.apple_wwdr_certificate_path is not None  # enforced by IssuerSettings
    password = settings.apple_private_key_password
    return load_identity(
        certificate_pem=settings.apple_certificate_path.read_bytes(),
        private_key_pem=settings.apple_private_key_path.read_bytes(),
        key_password=password.encode() if password else None,
        wwdr_pem=settings.apple_wwdr_certificate_path.read_bytes(),
        pass_type_identifier=settings.pass_type_identifier,
        team_identifier=settings.team_identifier,
    )
