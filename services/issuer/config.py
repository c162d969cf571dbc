"""Issuer settings (prefix TESSERA_ISSUER_); the Apple identity's come from the shared base."""

from pathlib import Path

from pydantic import Field, model_validator
from pydantic_settings import SettingsConfigDict

from services.issuer.template_cache import TIMINGS
from shared.settings import AppleIdentitySettings, Port

# The longest a template change takes to leave every issuer's template cache: a silent
# replica's lease and the ordering margin (services/issuer/template_cache.py).
TEMPLATE_INVALIDATION_SECONDS = TIMINGS.lease + TIMINGS.order_margin


class IssuerSettings(AppleIdentitySettings):
    model_config = SettingsConfigDict(env_prefix="TESSERA_ISSUER_", extra="ignore")

    port: Port = 8002
    # Google Wallet: a service account JSON key and the Wallet issuer id; unset = development.
    google_service_account_path: Path | None = None
    google_issuer_id: str | None = None
    google_api_base_url: str = "https://walletobjects.googleapis.com/walletobjects/v1"
    google_token_uri: str | None = None
    outbox_poll_seconds: float = Field(1.0, gt=0)
    # Commands handled at once by one issuer process (each in its own transaction).
    command_workers: int = Field(16, ge=1)
    # Jobs (docs/architecture.md#jobs): chunks one issuer process works on at once, how long a
    # claim holds a chunk (longer than any chunk takes; a dead replica's chunks are taken over
    # when it expires), the safety-net poll, and how long an import's upload may take before
    # the job is failed.
    job_workers: int = Field(2, ge=1)
    job_lease_seconds: float = Field(60.0, gt=0)
    job_poll_seconds: float = Field(1.0, gt=0)
    job_upload_timeout_seconds: float = Field(3600.0, gt=0)
    # A design change and the passes made meanwhile (docs/templates.md#passes-made-while-the-
    # design-changes): a command or a job's chunk prepared longer ago than
    # `max_prepared_age_seconds` is prepared again from fresh reads rather than committed, and
    # a rollout looks for passes still on an older design `rollout_sweep_seconds` after the
    # change (it must exceed the age plus the template caches' invalidation, up to 1.5 s; the
    # rest is a margin for a commit's own duration).
    max_prepared_age_seconds: float = Field(5.0, gt=0)
    rollout_sweep_seconds: float = Field(20.0, gt=0)
    # Finished jobs (and their results) are deleted this long after they finished.
    job_retention_days: float = Field(90.0, gt=0)
    # The Google step (docs/google-wallet.md#the-google-step), with Google credentials only:
    # objects upserted at once per process, how long a claim holds a pass, the safety-net
    # poll, and the longest wait between two attempts while Google fails.
    google_sync_workers: int = Field(8, ge=1)
    google_sync_lease_seconds: float = Field(60.0, gt=0)
    google_sync_poll_seconds: float = Field(5.0, gt=0)
    google_retry_max_seconds: float = Field(300.0, gt=0)

    @model_validator(mode="after")
    def _sweep_after_old_preparations(self) -> "IssuerSettings":
        # Below, a pass prepared from the old design can commit after the sweep looked, and
        # keeps the old design (docs/templates.md#passes-made-while-the-design-changes).
        floor = self.max_prepared_age_seconds + TEMPLATE_INVALIDATION_SECONDS
        if self.rollout_sweep_seconds <= floor:
            raise ValueError(
                f"TESSERA_ISSUER_ROLLOUT_SWEEP_SECONDS ({self.rollout_sweep_seconds:g}) must be "
                "greater than TESSERA_ISSUER_MAX_PREPARED_AGE_SECONDS "
                f"({self.max_prepared_age_seconds:g}) + {TEMPLATE_INVALIDATION_SECONDS:g} s "
                "(the template caches' invalidation): a pass being made from the old design "
                "could commit after the rollout's sweep looked for such passes"
            )
        return self

    @model_validator(mode="after")
    def _google_complete(self) -> "IssuerSettings":
        if self.google_service_account_path is not None and not self.google_issuer_id:
            raise ValueError(
                "TESSERA_ISSUER_GOOGLE_SERVICE_ACCOUNT_PATH needs TESSERA_ISSUER_GOOGLE_ISSUER_ID"
            )
        return self
