"""Webhooks service settings (prefix TESSERA_WEBHOOKS_)."""

from pydantic_settings import SettingsConfigDict

from shared.settings import ServiceSettings


class WebhooksSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="TESSERA_WEBHOOKS_", extra="ignore")

    port: int = 8003
