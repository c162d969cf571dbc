"""Events service settings (prefix TESSERA_EVENTS_); the Apple identity's, which APNs
authenticates, come from the shared base."""

from pathlib import Path

from pydantic import AliasChoices, Field, model_validator
from pydantic_settings import SettingsConfigDict

from services.events.registrations import DEFAULT_MAX_DEVICES_PER_PASS
from shared.google_ids import DEV_ISSUER_ID
from shared.settings import AppleIdentitySettings, Port

# Where Google's callback guide says its root signing keys are published.
DEFAULT_GOOGLE_ROOT_KEYS_URL = "https://pay.google.com/gp/m/issuer/keys"


class EventsSettings(AppleIdentitySettings):
    model_config = SettingsConfigDict(env_prefix="TESSERA_EVENTS_", extra="ignore")

    port: Port = 8001
    # Apple's web service (docs/wallet-callbacks.md#limits): devices one pass may register (a
    # family sharing a pass, each with a phone and a watch), and requests per window, per pass
    # and per client address (0 turns a rate limit off).
    max_devices_per_pass: int = Field(DEFAULT_MAX_DEVICES_PER_PASS, ge=1)
    wallet_rate_window_seconds: int = Field(60, ge=1, le=86_400)
    wallet_rate_limit_per_pass: int = Field(300, ge=0)
    wallet_rate_limit_per_address: int = Field(1200, ge=0)
    # Google's root signing keys, which its callbacks are verified against
    # (docs/wallet-callbacks.md#root-signing-keys): fetched from the URL and cached, as its HTTP
    # cache headers and each key's keyExpiration allow; or, for an install that cannot reach
    # Google, read once from a file of the same JSON key list (the URL is then not used).
    google_root_keys_url: str = Field(DEFAULT_GOOGLE_ROOT_KEYS_URL, pattern=r"^https?://")
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
    # APNs, for live updates of installed passes (docs/wallet-callbacks.md). By default the pass
    # type certificate is the TLS client certificate; a .p8 key with its key id and team id
    # switches to token auth.
    apns_url: str = "https://api.push.apple.com"
    apns_key_path: Path | None = None
    apns_key_id: str | None = None
    apns_team_id: str | None = None
    # Trust this CA (PEM) for the APNs server instead of the system's: for a local test APNs.
    apns_ca_path: Path | None = None
    apns_timeout_seconds: float = Field(10.0, gt=0)
    # Live updates one events process has in hand at once, taken off the work queue in batches
    # by two fetchers (services/events/handlers.py); each batch's pushes go out in parallel.
    live_update_workers: int = Field(100, ge=1)

    @model_validator(mode="after")
    def _apns_token_complete(self) -> "EventsSettings":
        token_auth = [self.apns_key_path, self.apns_key_id, self.apns_team_id]
        if any(token_auth) and not all(token_auth):
            raise ValueError(
                "APNs token auth needs TESSERA_EVENTS_APNS_KEY_PATH, _APNS_KEY_ID and "
                "_APNS_TEAM_ID together"
            )
        return self

    @model_validator(mode="after")
    def _root_keys_over_https(self) -> "EventsSettings":
        # Whoever answers this URL decides which callbacks are Google's.
        if self.environment == "production" and not self.google_root_keys_url.startswith(
            "https://"
        ):
            raise ValueError("TESSERA_EVENTS_GOOGLE_ROOT_KEYS_URL must be https:// in production")
        return self

    @property
    def apple_identity_required(self) -> bool:
        # With token auth APNs needs no certificate, so the private key need not be here.
        return self.apns_key_path is None
