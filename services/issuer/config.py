"""Issuer settings (prefix TESSERA_ISSUER_)."""

from pathlib import Path

from pydantic import Field, model_validator
from pydantic_settings import SettingsConfigDict

from shared.settings import ServiceSettings, refuse_placeholder


class IssuerSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="TESSERA_ISSUER_", extra="ignore")

    port: int = 8002
    # Where the development signing identity is generated on first start.
    data_dir: Path = Path(".tessera")
    pass_type_identifier: str = "pass.dev.tessera"  # noqa: S105 (an identifier, not a secret)
    team_identifier: str = "TESSERADEV"
    # A production identity and Apple's WWDR G4 intermediate: the pass type certificate and key
    # as PEM files (the key optionally encrypted), or both in one PKCS#12 (.p12) file.
    apple_certificate_path: Path | None = None
    apple_private_key_path: Path | None = None
    apple_pkcs12_path: Path | None = None
    apple_private_key_password: str | None = None
    apple_wwdr_certificate_path: Path | None = None
    # Google Wallet: a service account JSON key and the Wallet issuer id; unset = development.
    google_service_account_path: Path | None = None
    google_issuer_id: str | None = None
    google_api_base_url: str = "https://walletobjects.googleapis.com/walletobjects/v1"
    google_token_uri: str | None = None
    outbox_poll_seconds: float = 1.0
    # APNs, for live updates of installed passes. By default the pass type certificate above is
    # the TLS client certificate; a .p8 key with its key id and team id switches to token auth.
    apns_url: str = "https://api.push.apple.com"
    apns_key_path: Path | None = None
    apns_key_id: str | None = None
    apns_team_id: str | None = None
    # Trust this CA (PEM) for the APNs server instead of the system's: for a local test APNs.
    apns_ca_path: Path | None = None
    apns_timeout_seconds: float = Field(10.0, gt=0)
    # Commands handled at once by one issuer process (each in its own transaction).
    command_workers: int = 16

    @model_validator(mode="after")
    def _identity_complete(self) -> "IssuerSettings":
        refuse_placeholder(
            self.apple_private_key_password, self.environment, "apple_private_key_password"
        )
        pem = [self.apple_certificate_path, self.apple_private_key_path]
        if any(pem) and self.apple_pkcs12_path is not None:
            raise ValueError("set either the Apple PEM files or TESSERA_ISSUER_APPLE_PKCS12_PATH")
        if any(pem) and not all(pem):
            raise ValueError(
                "set TESSERA_ISSUER_APPLE_CERTIFICATE_PATH and _APPLE_PRIVATE_KEY_PATH together"
            )
        if self.apple_configured and self.apple_wwdr_certificate_path is None:
            raise ValueError("an Apple identity needs TESSERA_ISSUER_APPLE_WWDR_CERTIFICATE_PATH")
        if self.environment == "production" and not self.apple_configured:
            raise ValueError("production needs a real Apple signing identity")
        token_auth = [self.apns_key_path, self.apns_key_id, self.apns_team_id]
        if any(token_auth) and not all(token_auth):
            raise ValueError(
                "APNs token auth needs TESSERA_ISSUER_APNS_KEY_PATH, _APNS_KEY_ID and "
                "_APNS_TEAM_ID together"
            )
        if self.google_service_account_path is not None and not self.google_issuer_id:
            raise ValueError(
                "TESSERA_ISSUER_GOOGLE_SERVICE_ACCOUNT_PATH needs TESSERA_ISSUER_GOOGLE_ISSUER_ID"
            )
        return self

    @property
    def apple_configured(self) -> bool:
        return self.apple_pkcs12_path is not None or self.apple_certificate_path is not None
