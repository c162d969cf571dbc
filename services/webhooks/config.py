"""Webhooks service settings (prefix TESSERA_WEBHOOKS_; the three delivery knobs keep the names
TESSERA_WEBHOOK_TIMEOUT_SECONDS, TESSERA_WEBHOOK_RETRY_SCHEDULE and
TESSERA_WEBHOOK_ALLOW_PRIVATE_NETWORKS)."""

from pathlib import Path
from typing import Annotated

from pydantic import AliasChoices, Field, SecretStr, field_validator, model_validator
from pydantic_settings import NoDecode, SettingsConfigDict

from shared.settings import Port, ServiceSettings, refuse_placeholder

DEFAULT_RETRY_SCHEDULE_SECONDS = (0.0, 30.0, 300.0, 1800.0, 7200.0, 43200.0, 86400.0)
# A delay before an attempt: finite and not negative.
Delay = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class WebhooksSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="TESSERA_WEBHOOKS_", extra="ignore")

    port: Port = 8003
    # Fernet keys (comma-separated; the first encrypts, all decrypt, so keys can be rotated)
    # for the signing secrets at rest. Required: `tessera up` generates one for development.
    # The alias only so that a missing key is reported by its variable's name.
    secret_key: SecretStr = Field(validation_alias=AliasChoices("TESSERA_WEBHOOKS_SECRET_KEY"))
    timeout_seconds: float = Field(
        10.0, gt=0, validation_alias=AliasChoices("TESSERA_WEBHOOK_TIMEOUT_SECONDS")
    )
    # Seconds to wait before each attempt; its length is the number of attempts. NoDecode: the
    # variable is "0,30,300", not JSON.
    retry_schedule_seconds: Annotated[list[Delay], NoDecode] = Field(
        default_factory=lambda: list(DEFAULT_RETRY_SCHEDULE_SECONDS),
        min_length=1,
        validation_alias=AliasChoices("TESSERA_WEBHOOK_RETRY_SCHEDULE"),
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
    # A webhook whose every attempt failed for this long is disabled (docs/webhooks.md).
    disable_after: float = Field(5 * 86400.0, gt=0)
    # Deliveries that are over (delivered, dead) are deleted this long after their event
    # (docs/webhooks.md#retention); their history, resends and recovers reach no further.
    delivery_retention_days: float = Field(90.0, gt=0)

    @field_validator("retry_schedule_seconds", mode="before")
    @classmethod
    def _split_schedule(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        try:
            return [float(part) for part in value.split(",")]
        except ValueError as exc:
            raise ValueError("must be comma-separated seconds, e.g. 0,30,300") from exc

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
        return self
