"""API settings (prefix TESSERA_API_)."""

from datetime import timedelta

from pydantic import AliasChoices, Field, model_validator
from pydantic_settings import SettingsConfigDict

from shared.settings import ServiceSettings, refuse_placeholder


class ApiSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="TESSERA_API_", extra="ignore")

    port: int = 8000
    # The operator API (/admin/v1) is served only when this is set.
    admin_token: str | None = Field(None, validation_alias=AliasChoices("TESSERA_ADMIN_TOKEN"))
    max_body_bytes: int = Field(1_048_576, gt=0)
    idempotency_ttl: timedelta = timedelta(hours=24)

    @model_validator(mode="after")
    def _real_admin_token(self) -> "ApiSettings":
        refuse_placeholder(self.admin_token, self.environment, "TESSERA_ADMIN_TOKEN")
        token = self.admin_token
        if token is not None and self.environment == "production" and len(token) < 32:
            raise ValueError("TESSERA_ADMIN_TOKEN must be at least 32 characters")
        return self
