"""What the api receives (request bodies) and returns (the spec's objects)."""

from typing import Any, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    EmailStr,
    Field,
    StrictBool,
    StrictInt,
    field_validator,
    model_validator,
)

from services.api.bodies import storable_problem
from shared.design import Design
from shared.errors import InvalidRequest
from shared.messages import DEFAULT_GRACE_SECONDS, MAX_GRACE_SECONDS, WebhookEventType
from shared.models import MAX_BUNDLE_PASSES, AppleStyle, Mode, TemplateType
from shared.pass_limits import (
    MAX_HOLDER_NAME_CHARS,
    MAX_METADATA_KEYS,
    field_values_problem,
    metadata_problem,
)
from shared.redemption import RedemptionInput
from shared.scans import MAX_CODE_CHARS, MAX_LOCATION_CHARS
from shared.urls import url_characters_problem


class StorableBody(BaseModel):
    """A body whose every value can be carried and stored (services/api/bodies.py)."""

    @model_validator(mode="before")
    @classmethod
    def _storable(cls, data: Any) -> Any:
        problem = storable_problem(data, ())
        if problem is not None:
            param, reason = problem
            # Raised as the API error itself: a ValueError here could not name the field.
            raise InvalidRequest(
                f"Invalid {param or 'request body'}: {reason}.",
                param=param,
                code="parameter_invalid",
            )
        return data


class _Body(StorableBody):
    model_config = ConfigDict(extra="forbid")


class TemplateCreate(_Body):
    name: str = Field(min_length=1, max_length=200)
    type: TemplateType
    apple_style: AppleStyle
    design: Design
    require_download_link: StrictBool = False
    redemption: RedemptionInput | None = None


class TemplateUpdate(_Body):
    name: str | None = Field(None, min_length=1, max_length=200)
    design: Design | None = None
    archived: StrictBool | None = None
    require_download_link: StrictBool | None = None
    # Replaces the policy whole, as `design` is replaced; null restores the type's defaults.
    redemption: RedemptionInput | None = None


def _within_pass_limits(
    field_values: dict[str, str] | None, metadata: dict[str, Any] | None
) -> None:
    """shared/pass_limits.py, raised as the API error itself so that it names the param."""
    problem = field_values_problem(field_values or {}) or metadata_problem(metadata or {})
    if problem is not None:
        param, message = problem
        raise InvalidRequest(message, param=param, code="parameter_too_large")


class PassCreate(_Body):
    template_id: str = Field(max_length=100)
    holder_email: EmailStr | None = None
    holder_name: str | None = Field(None, max_length=MAX_HOLDER_NAME_CHARS)
    field_values: dict[str, str] = Field(default_factory=dict, max_length=100)
    metadata: dict[str, Any] = Field(default_factory=dict, max_length=MAX_METADATA_KEYS)

    @model_validator(mode="after")
    def _bounded(self) -> "PassCreate":
        _within_pass_limits(self.field_values, self.metadata)
        return self


class PassUpdate(_Body):
    field_values: dict[str, str] | None = Field(None, max_length=100)
    metadata: dict[str, Any] | None = Field(None, max_length=MAX_METADATA_KEYS)

    @model_validator(mode="after")
    def _something(self) -> "PassUpdate":
        if self.field_values is None and self.metadata is None:
            raise ValueError("send field_values, metadata or both")
        # Null values delete keys; what they would merge into is checked by the issuer.
        present = {k: v for k, v in (self.metadata or {}).items() if v is not None}
        _within_pass_limits(self.field_values, present)
        return self


class DownloadLinkCreate(_Body):
    expires_in: StrictInt = Field(3600, ge=60, le=604800, description="Seconds, 60 to 604800.")


WEBHOOK_TYPES = frozenset(get_args(WebhookEventType))


def _webhook_events(value: Any) -> Any:
    """Every entry a spec 6.2 type or "*"; the error names `events` as a whole."""
    if isinstance(value, list):
        unknown = [item for item in value if not isinstance(item, str) or item not in WEBHOOK_TYPES]
        if unknown:
            raise ValueError(f"unknown event types {unknown}; use {sorted(WEBHOOK_TYPES)}")
    return value


def _webhook_url(value: str | None) -> str | None:
    """Control characters and whitespace refused here as the webhooks service refuses them
    (same check, same error), so that nothing the owner would refuse crosses NATS."""
    if value is not None and (problem := url_characters_problem(value)) is not None:
        # Raised as the API error itself, with the owner's code: a ValueError would say
        # parameter_invalid.
        raise InvalidRequest(f"Invalid url: {problem}.", param="url", code="url_invalid")
    return value


# A per-webhook throttle (docs/webhooks.md); null: unlimited.
MaxDeliveriesPerSecond = StrictInt | None
THROTTLE = Field(None, ge=1, le=10_000, description="1 to 10000 deliveries a second, or null.")


class WebhookCreate(_Body):
    url: str = Field(min_length=1, max_length=2048)
    events: list[WebhookEventType] = Field(min_length=1, max_length=20)
    description: str | None = Field(None, max_length=500)
    enabled: StrictBool = True
    max_deliveries_per_second: MaxDeliveriesPerSecond = THROTTLE

    _events = field_validator("events", mode="before")(_webhook_events)
    _url = field_validator("url")(_webhook_url)


class WebhookUpdate(_Body):
    url: str | None = Field(None, min_length=1, max_length=2048)
    events: list[WebhookEventType] | None = Field(None, min_length=1, max_length=20)
    description: str | None = Field(None, max_length=500)
    enabled: StrictBool | None = None
    max_deliveries_per_second: MaxDeliveriesPerSecond = THROTTLE

    _events = field_validator("events", mode="before")(_webhook_events)
    _url = field_validator("url")(_webhook_url)


class WebhookSecretRotate(_Body):
    grace_period_seconds: StrictInt = Field(
        DEFAULT_GRACE_SECONDS,
        ge=0,
        le=MAX_GRACE_SECONDS,
        description="How long the replaced secret keeps signing, 0 to 604800 (0: stop at once).",
    )


class AccountCreate(_Body):
    name: str = Field(min_length=1, max_length=200)
    plan: Literal["free", "paid"]


class AccountUpdate(_Body):
    plan: Literal["free", "paid"]


class ApiKeyCreate(_Body):
    mode: Mode


# Many passes at once (issue 12): the rows are checked one by one (`PassCreate`,
# `ImportRowCreate`), so that a bad row fails alone instead of the whole request.
MAX_BATCH_ROWS = 100
MAX_IMPORT_ROWS = 100_000


class PassBatchCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    passes: list[Any] = Field(
        min_length=1, max_length=MAX_BATCH_ROWS, description="1 to 100 POST /v1/passes bodies."
    )
    bundle: StrictBool = Field(
        False,
        description=f"Also make a pass bundle of the passes made (at most {MAX_BUNDLE_PASSES} "
        "rows).",
    )


class PassBundleCreate(_Body):
    pass_ids: list[str] = Field(
        min_length=1,
        max_length=MAX_BUNDLE_PASSES,
        description=f"1 to {MAX_BUNDLE_PASSES} distinct ids of passes that are not voided.",
    )


class ImportRowCreate(_Body):
    """A row of an import job: a POST /v1/passes body without the template (said once)."""

    holder_email: EmailStr | None = None
    holder_name: str | None = Field(None, max_length=MAX_HOLDER_NAME_CHARS)
    field_values: dict[str, str] = Field(default_factory=dict, max_length=100)
    metadata: dict[str, Any] = Field(default_factory=dict, max_length=MAX_METADATA_KEYS)

    @model_validator(mode="after")
    def _bounded(self) -> "ImportRowCreate":
        _within_pass_limits(self.field_values, self.metadata)
        return self


class ImportJobCreate(BaseModel):
    """POST /v1/jobs with type `import_passes` (more job types join it as a union on `type`)."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["import_passes"]
    template_id: str = Field(max_length=100)
    rows: list[Any] = Field(
        min_length=1,
        max_length=MAX_IMPORT_ROWS,
        description="1 to 100,000 rows: holder_name, holder_email, field_values, metadata.",
    )


class ScanCreate(_Body):
    """POST /v1/scans: a scanned code, or a pass id (docs/redemption.md)."""

    code: str | None = Field(
        None, min_length=1, max_length=MAX_CODE_CHARS, description="The barcode message read."
    )
    pass_id: str | None = Field(None, max_length=100)
    location: str | None = Field(None, max_length=MAX_LOCATION_CHARS)
    metadata: dict[str, Any] = Field(default_factory=dict, max_length=MAX_METADATA_KEYS)

    @model_validator(mode="after")
    def _one_of(self) -> "ScanCreate":
        if (self.code is None) == (self.pass_id is None):
            raise InvalidRequest(
                "Send exactly one of code and pass_id.", param="code", code="parameter_invalid"
            )
        _within_pass_limits(None, self.metadata)
        return self


class ScannerKeyCreate(_Body):
    name: str = Field(min_length=1, max_length=100)
