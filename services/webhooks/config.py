"""Webhooks service settings (prefix TESSERA_WEBHOOKS_; the three delivery knobs keep the names
TESSERA_WEBHOOK_TIMEOUT_SECONDS, TESSERA_WEBHOOK_RETRY_SCHEDULE and
TESSERA_WEBHOOK_ALLOW_PRIVATE_NETWORKS)."""

from pathlib import Path

from pydantic import AliasChoices, Field, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from shared.settings import ServiceSettings, refuse_placeholder

DEFAULT_SCHEDULE = "0,30,300,1800,7200,43200,86400"


class WebhooksSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="TESSERA_WEBHOOKS_", extra="ignore")

    port: int = 8003
    # Fernet keys (comma-separated; the first encrypts, all decrypt, so keys can be rotated)
    # for the signing secrets at rest. No default: `tessera up` generates one for development.
    secret_key: str | None = None
    timeout_seconds: float = Field(
        10.0, gt=0, validation_alias=AliasChoices("TESSERA_WEBHOOK_TIMEOUT_SECONDS")
    )
    retry_schedule: str = Field(
        DEFAULT_SCHEDULE, validation_alias=AliasChoices("TESSERA_WEBHOOK_RETRY_SCHEDULE")
    )
    allow_private_networks: bool = Field(
        False, validation_alias=AliasChoices("TESSERA_WEBHOOK_ALLOW_PRIVATE_NETWORKS")
    )
    # A hosts-style file consulted before DNS for webhook hosts (services/webhooks/resolver.py).
    resolver_hosts_file: Path | None = Field(
        None, validation_alias=AliasChoices("TESSERA_WEBHOOK_RESOLVER_HOSTS_FILE")
    )
    # Webhooks one account may have in one mode (test and live count separately).
    max_per_account: int = Field(50, gt=0)
    # How long a replica's claim on an attempt lasts before another may take it over.
    lease_seconds: float = Field(60.0, gt=0)
    # Attempts in flight per replica: in all, to one webhook, and for one account. An attempt is
    # a coroutine and a socket, so the total can be generous; the per-account share is what
    # keeps one tenant's slow endpoints from taking the slots every other tenant needs.
    max_concurrent_deliveries: int = Field(256, gt=0)
    max_concurrent_per_endpoint: int = Field(4, gt=0)
    max_concurrent_per_account: int = Field(16, gt=0)
    scheduler_poll_seconds: float = Field(1.0, gt=0)

    @field_validator("retry_schedule")
    @classmethod
    def _schedule(cls, value: str) -> str:
        try:
            delays = [float(part) for part in value.split(",")]
        except ValueError as exc:
            raise ValueError("must be comma-separated seconds, e.g. 0,30,300") from exc
        if not delays or any(delay < 0 for delay in delays):
            raise ValueError("must list at least one delay, none negative")
        return value

    @model_validator(mode="after")
    def _lease(self) -> "WebhooksSettings":
        # An attempt must end inside its lease, or another replica could send it again.
        if self.lease_seconds <= self.timeout_seconds:
            raise ValueError(
                "TESSERA_WEBHOOKS_LEASE_SECONDS must be greater than "
                "TESSERA_WEBHOOK_TIMEOUT_SECONDS"
            )
        return self

    @model_validator(mode="after")
    def _secret_key(self) -> "WebhooksSettings":
        refuse_placeholder(self.secret_key, self.environment, "TESSERA_WEBHOOKS_SECRET_KEY")
        if self.secret_key is None:
            raise ValueError(
                "TESSERA_WEBHOOKS_SECRET_KEY is required (a Fernet key: "
                "python -c 'from cryptography.fernet import Fernet; "
                "print(Fernet.generate_key().decode())')"
            )
        return self

    @property
    def retry_delays(self) -> list[float]:
        """Seconds to wait before each attempt; its length is the number of attempts."""
        return [float(part) for part in self.retry_schedule.split(",")]
