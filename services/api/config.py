"""API settings (prefix TESSERA_API_), including the plan table (docs/plans-and-limits.md).

`TESSERA_API_PLANS` overrides the whole plan table as JSON, for example
`{"free": {"live_keys": false, "rate_limit": 5, "rate_window_seconds": 1,
"monthly_passes": {"test": 10, "live": 0}}, "paid": {...}}`.
"""

from datetime import timedelta

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, SecretStr, model_validator
from pydantic_settings import SettingsConfigDict

from shared.settings import MIN_TOKEN_CHARS, Port, ServiceSettings, refuse_placeholder


class MonthlyPasses(BaseModel):
    """Passes an account may issue per calendar month (UTC), per mode."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    test: int = Field(1_000_000, ge=0)
    live: int = Field(0, ge=0)


class PlanLimits(BaseModel):
    """What one plan allows: live keys, a request rate and a monthly pass quota."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    live_keys: bool = False
    # A fixed window per API key mode (account + test/live): `rate_limit` requests per window.
    rate_limit: int = Field(100, gt=0)
    rate_window_seconds: int = Field(1, gt=0)
    monthly_passes: MonthlyPasses = MonthlyPasses()


def default_plans() -> dict[str, PlanLimits]:
    return {
        "free": PlanLimits(
            live_keys=False,
            rate_limit=100,
            rate_window_seconds=1,
            monthly_passes=MonthlyPasses(test=1_000_000, live=0),
        ),
        "paid": PlanLimits(
            live_keys=True,
            rate_limit=1_000,
            rate_window_seconds=1,
            monthly_passes=MonthlyPasses(test=1_000_000, live=1_000_000),
        ),
    }


class ApiSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="TESSERA_API_", extra="ignore")

    port: Port = 8000
    # The operator API (/admin/v1) is served only when this is set.
    admin_token: SecretStr | None = Field(
        None, validation_alias=AliasChoices("TESSERA_ADMIN_TOKEN")
    )
    # Wrong admin tokens one client address may present per 5 minutes (docs/operations.md).
    admin_guesses_per_window: int = Field(10, gt=0)
    max_body_bytes: int = Field(1_048_576, gt=0)
    # How long an Idempotency-Key's record answers replays (docs/api-decisions.md#idempotency).
    # A client's retries come minutes or hours later, and a record gone before then makes a
    # retry run the request again (one hour at least; MongoDB's TTL monitor runs every minute).
    # At most 48 hours: the issuer and webhooks keep a command's result that long, and a retry
    # after a 5xx re-sends the command for its owner to answer from it, not to run it again.
    idempotency_ttl: timedelta = Field(
        timedelta(hours=24), ge=timedelta(hours=1), le=timedelta(hours=48)
    )
    # The plan table; an account whose plan is missing here gets the "free" limits.
    plans: dict[str, PlanLimits] = Field(default_factory=default_plans)

    @model_validator(mode="after")
    def _real_admin_token(self) -> "ApiSettings":
        refuse_placeholder(self.admin_token, self.environment, "TESSERA_ADMIN_TOKEN")
        token = self.admin_token
        if token is not None and token.get_secret_value() != token.get_secret_value().strip():
            # A presented token is read without surrounding spaces: this one could never match.
            raise ValueError("TESSERA_ADMIN_TOKEN must not begin or end with white space")
        short = token is not None and len(token.get_secret_value()) < MIN_TOKEN_CHARS
        if short and self.environment == "production":
            raise ValueError(f"TESSERA_ADMIN_TOKEN must be at least {MIN_TOKEN_CHARS} characters")
        return self

    @model_validator(mode="after")
    def _free_plan_exists(self) -> "ApiSettings":
        if "free" not in self.plans:
            raise ValueError("TESSERA_API_PLANS must define the 'free' plan")
        return self
