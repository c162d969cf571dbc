"""Events service settings (prefix TESSERA_EVENTS_)."""

from pathlib import Path

from pydantic import AliasChoices, Field
from pydantic_settings import SettingsConfigDict

from services.issuer.google.identity import DEV_ISSUER_ID
from shared.settings import ServiceSettings


class EventsSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="TESSERA_EVENTS_", extra="ignore")

    port: int = 8001
    # Google's root signing keys (their JSON key list). Unset: every Google callback is refused
    # with 503, since nothing could be verified (docs/wallet-callbacks.md).
    google_root_keys_path: Path | None = None
    # The recipient id Google signs callbacks for; the issuer's setting of the same meaning is
    # read too, so one .env configures both. Unset: the development issuer id, as on the issuer.
    google_issuer_id: str = Field(
        DEV_ISSUER_ID,
        pattern=r"^[0-9]{1,32}$",
        validation_alias=AliasChoices(
            "TESSERA_EVENTS_GOOGLE_ISSUER_ID", "TESSERA_ISSUER_GOOGLE_ISSUER_ID"
        ),
    )
