"""Events service settings (prefix TESSERA_EVENTS_)."""

from pydantic_settings import SettingsConfigDict

from shared.settings import ServiceSettings


class EventsSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="TESSERA_EVENTS_", extra="ignore")

    port: int = 8001
