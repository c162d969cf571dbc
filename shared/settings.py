"""Settings every service shares. Each service subclasses `ServiceSettings` with its own prefix.

Common fields read their `TESSERA_*` variable whatever the subclass prefix is (explicit aliases),
so one `.env` configures the whole stack; service fields use the service prefix
(`TESSERA_API_PORT`, `TESSERA_ISSUER_DATA_DIR`, ...).
"""

from typing import Literal

from pydantic import AliasChoices, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

Environment = Literal["development", "test", "production"]
_PLACEHOLDERS = {"", "changeme", "change-me", "secret", "placeholder", "xxx", "todo"}


def _common(name: str) -> AliasChoices:
    return AliasChoices(f"TESSERA_{name}")


class ServiceSettings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="TESSERA_", extra="ignore", env_ignore_empty=True, populate_by_name=True
    )

    environment: Environment = Field("development", validation_alias=_common("ENVIRONMENT"))
    nats_url: str = Field("nats://127.0.0.1:4222", validation_alias=_common("NATS_URL"))
    mongodb_url: str = Field(
        "mongodb://127.0.0.1:27017/?directConnection=true",
        validation_alias=_common("MONGODB_URL"),
    )
    mongodb_database: str = Field("tessera", validation_alias=_common("MONGODB_DATABASE"))
    log_level: str = Field("INFO", validation_alias=_common("LOG_LEVEL"))
    host: str = Field("127.0.0.1", validation_alias=_common("HOST"))
    base_url: str = Field("http://127.0.0.1:8000", validation_alias=_common("BASE_URL"))
    site_url: str = Field("http://127.0.0.1:8000", validation_alias=_common("SITE_URL"))
    wallet_url: str = Field("http://127.0.0.1:8001", validation_alias=_common("WALLET_URL"))
    request_timeout_seconds: float = Field(
        5.0, gt=0, validation_alias=_common("REQUEST_TIMEOUT_SECONDS")
    )
    # Several replicas of one service on one host (docs/scaling.md): each binds the service's
    # port with SO_REUSEPORT, so the kernel spreads connections, and also listens on a port of
    # its own, so its /readyz and /metrics can be reached one replica at a time.
    reuse_port: bool = Field(False, validation_alias=_common("REUSE_PORT"))
    replica_port: int | None = Field(None, ge=1, le=65535, validation_alias=_common("REPLICA_PORT"))
    # The replica's name (e.g. "issuer-2"), added to its log lines.
    replica: str | None = Field(None, validation_alias=_common("REPLICA"))
    # When set, GET /metrics answers only `Authorization: Bearer <token>` (docs/operations.md).
    metrics_token: str | None = Field(None, validation_alias=_common("METRICS_TOKEN"))
    # A connection must send a complete request head within this long (shared/http_protocol.py).
    header_timeout_seconds: float = Field(
        10.0, gt=0, validation_alias=_common("HEADER_TIMEOUT_SECONDS")
    )
    # Copies of the events stream kept by a NATS cluster (3 in production; 1 on a single server).
    events_stream_replicas: int = Field(
        1, ge=1, le=5, validation_alias=_common("EVENTS_STREAM_REPLICAS")
    )

    @field_validator("base_url", "site_url", "wallet_url")
    @classmethod
    def _no_trailing_slash(cls, value: str) -> str:
        return value.rstrip("/")

    @field_validator("metrics_token")
    @classmethod
    def _no_placeholder_token(cls, value: str | None) -> str | None:
        if value is not None and value.lower() in _PLACEHOLDERS:
            raise ValueError("TESSERA_METRICS_TOKEN is a placeholder; set a real secret")
        return value

    @model_validator(mode="after")
    def _https_in_production(self) -> "ServiceSettings":
        # Apple Wallet only calls a web service over HTTPS; holders' links should be too.
        if self.environment == "production":
            for name in ("site_url", "wallet_url"):
                if not getattr(self, name).startswith("https://"):
                    raise ValueError(f"TESSERA_{name.upper()} must be https:// in production")
        return self


def refuse_placeholder(value: str | None, environment: Environment, name: str) -> str | None:
    """Secrets have no defaults; outside development a placeholder value is refused."""
    if value is not None and environment != "development" and value.lower() in _PLACEHOLDERS:
        raise ValueError(f"{name} is a placeholder; set a real secret")
    return value
