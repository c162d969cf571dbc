"""Events service settings (prefix TESSERA_EVENTS_)."""

from pathlib import Path

from pydantic import AliasChoices, Field
from pydantic_settings import SettingsConfigDict

from services.events.registrations import DEFAULT_MAX_DEVICES_PER_PASS
from services.issuer.google.identity import DEV_ISSUER_ID
from shared.settings import ServiceSettings


class EventsSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="TESSERA_EVENTS_", extra="ignore")

    port: int = 8001
    # Apple's web service (docs/wallet-callbacks.md#limits): devices one pass may register (a
    # family sharing a pass, each with a phone and a watch), and requests per window, per pass
    # and per client address (0 turns a rate limit off).
    max_devices_per_pass: int = Field(DEFAULT_MAX_DEVICES_PER_PASS, ge=1)
    wallet_rate_window_seconds: int = Field(60, ge=1, le=86_400)
    wallet_rate_limit_per_pass: int = Field(300, ge=0)
    wallet_rate_limit_per_address: int = Field(1200, ge=0)
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
