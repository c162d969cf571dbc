"""Settings every service shares. Each service subclasses `ServiceSettings` with its own prefix.

Common fields read their `TESSERA_*` variable whatever the subclass prefix is (explicit aliases),
so one `.env` configures the whole stack; service fields use the service prefix
(`TESSERA_API_PORT`, `TESSERA_ISSUER_OUTBOX_POLL_SECONDS`, ...). `AppleIdentitySettings` adds the
Apple pass type identity for the two services that use it (the issuer and the events service).

Every subclass also reads `.env` in the working directory (`make run` and `tessera up` start the
services from the checkout), or the file `TESSERA_ENV_FILE` names (empty: none; the test suite
sets that, so a developer's .env never changes a test): the environment wins over the file, and
the file over the defaults. Subclasses set only their prefix; pydantic merges this config in.
"""

import os
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AliasChoices, Field, SecretStr, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    DotEnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

Environment = Literal["development", "test", "production"]
ENV_FILE = ".env"


def env_file() -> str | None:
    """The dotenv file the settings read, looked up when settings are built (not at import)."""
    return os.environ.get("TESSERA_ENV_FILE", ENV_FILE) or None


_PLACEHOLDERS = {"", "changeme", "change-me", "secret", "placeholder", "xxx", "todo"}
# Bearer tokens an operator sets (metrics, admin) are at least this long in production.
MIN_TOKEN_CHARS = 32


def _common(name: str) -> AliasChoices:
    return AliasChoices(f"TESSERA_{name}")


# A service's HTTP port: refused at start outside 1-65535 (0 would bind a random port that no
# healthcheck finds; above 65535 binding fails with a traceback).
Port = Annotated[int, Field(ge=1, le=65535)]


class ServiceSettings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="TESSERA_",
        extra="ignore",
        env_ignore_empty=True,
        populate_by_name=True,
        env_file_encoding="utf-8",
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # pydantic-settings' own order (arguments, environment, dotenv, secrets), with the dotenv
        # file chosen per instance so TESSERA_ENV_FILE can change it.
        dotenv = DotEnvSettingsSource(settings_cls, env_file=env_file())
        return init_settings, env_settings, dotenv, file_secret_settings

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
    metrics_token: SecretStr | None = Field(None, validation_alias=_common("METRICS_TOKEN"))
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
    def _no_placeholder_token(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and value.get_secret_value().lower() in _PLACEHOLDERS:
            raise ValueError("TESSERA_METRICS_TOKEN is a placeholder; set a real secret")
        return value

    @model_validator(mode="after")
    def _https_in_production(self) -> "ServiceSettings":
        # Apple Wallet only calls a web service over HTTPS; holders' links should be too.
        if self.environment == "production":
            for name in ("site_url", "wallet_url"):
                if not getattr(self, name).startswith("https://"):
                    raise ValueError(f"TESSERA_{name.upper()} must be https:// in production")
            # /metrics is served on the public ports and guesses are not limited there: a
            # token long enough that guessing it is hopeless, as the admin token's.
            token = self.metrics_token
            if token is not None and len(token.get_secret_value()) < MIN_TOKEN_CHARS:
                raise ValueError(
                    f"TESSERA_METRICS_TOKEN must be at least {MIN_TOKEN_CHARS} characters"
                )
        return self


def refuse_placeholder(
    value: SecretStr | None, environment: Environment, name: str
) -> SecretStr | None:
    """Secrets have no defaults; outside development a placeholder value is refused."""
    if value is None or environment == "development":
        return value
    if value.get_secret_value().lower() in _PLACEHOLDERS:
        raise ValueError(f"{name} is a placeholder; set a real secret")
    return value


class AppleIdentitySettings(ServiceSettings):
    """The Apple pass type identity: the issuer signs passes with it, the events service pushes
    through APNs with it. Without a service prefix, so one set of variables serves both."""

    # Where the development identity is generated on first start.
    data_dir: Path = Field(Path(".tessera"), validation_alias=_common("DATA_DIR"))
    pass_type_identifier: str = Field(
        "pass.dev.tessera", validation_alias=_common("PASS_TYPE_IDENTIFIER")
    )
    team_identifier: str = Field("TESSERADEV", validation_alias=_common("TEAM_IDENTIFIER"))
    # A production identity and Apple's WWDR G4 intermediate: the pass type certificate and key
    # as PEM files (the key optionally encrypted), or both in one PKCS#12 (.p12) file.
    apple_certificate_path: Path | None = Field(
        None, validation_alias=_common("APPLE_CERTIFICATE_PATH")
    )
    apple_private_key_path: Path | None = Field(
        None, validation_alias=_common("APPLE_PRIVATE_KEY_PATH")
    )
    apple_pkcs12_path: Path | None = Field(None, validation_alias=_common("APPLE_PKCS12_PATH"))
    apple_private_key_password: SecretStr | None = Field(
        None, validation_alias=_common("APPLE_PRIVATE_KEY_PASSWORD")
    )
    apple_wwdr_certificate_path: Path | None = Field(
        None, validation_alias=_common("APPLE_WWDR_CERTIFICATE_PATH")
    )

    @model_validator(mode="after")
    def _apple_identity_complete(self) -> "AppleIdentitySettings":
        refuse_placeholder(
            self.apple_private_key_password, self.environment, "TESSERA_APPLE_PRIVATE_KEY_PASSWORD"
        )
        pem = [self.apple_certificate_path, self.apple_private_key_path]
        if any(pem) and self.apple_pkcs12_path is not None:
            raise ValueError("set either the Apple PEM files or TESSERA_APPLE_PKCS12_PATH")
        if any(pem) and not all(pem):
            raise ValueError(
                "set TESSERA_APPLE_CERTIFICATE_PATH and TESSERA_APPLE_PRIVATE_KEY_PATH together"
            )
        if self.apple_configured and self.apple_wwdr_certificate_path is None:
            raise ValueError("an Apple identity needs TESSERA_APPLE_WWDR_CERTIFICATE_PATH")
        if (
            self.environment == "production"
            and self.apple_identity_required
            and not self.apple_configured
        ):
            raise ValueError("production needs a real Apple signing identity (TESSERA_APPLE_*)")
        return self

    @property
    def apple_configured(self) -> bool:
        return self.apple_pkcs12_path is not None or self.apple_certificate_path is not None

    @property
    def apple_identity_required(self) -> bool:
        """Whether this service cannot work without the identity in production."""
        return True
