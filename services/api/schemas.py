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


def check_storable(data: Any) -> Any:
    """`data` if every value in it can be carried and stored (services/api/bodies.py), else
    the 400 that names the first that cannot."""
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


class StorableBody(BaseModel):
    """A body whose every value can be carried and stored (services/api/bodies.py)."""

    @model_validator(mode="before")
    @classmethod
    def _storable(cls, data: Any) -> Any:
        return check_storable(data)


class _Body(StorableBody):
    model_config = ConfigDict(extra="forbid")


class TemplateCreate(_Body):
    name: str = Field(
        min_length=1, max_length=200, description="Display name, 1 to 200 characters."
    )
    type: TemplateType = Field(
        description="`event`, `membership`, `coupon`, `loyalty` or `generic`; decides the "
        "redemption defaults."
    )
    apple_style: AppleStyle = Field(
        description="The Apple Wallet pass style: `eventTicket`, `generic`, `storeCard`, "
        "`coupon` or `boardingPass`."
    )
    design: Design = Field(description="What every pass of the template shows (docs/templates.md).")
    require_download_link: StrictBool = Field(
        False,
        description="When true, passes are reachable only through expiring download links; "
        "their permanent URLs answer 404.",
    )
    redemption: RedemptionInput | None = Field(
        None,
        description="How often and when passes may be scanned in; left out: the type's defaults.",
    )


class TemplateUpdate(_Body):
    name: str | None = Field(None, min_length=1, max_length=200, description="A new display name.")
    design: Design | None = Field(
        None,
        description="A new design, replacing the old one whole; starts a `template_rollout` job.",
    )
    archived: StrictBool | None = Field(
        None, description="true archives the template (no new passes); false restores it."
    )
    require_download_link: StrictBool | None = Field(
        None, description="true makes the passes reachable only through download links, at once."
    )
    # Replaces the policy whole, as `design` is replaced; null restores the type's defaults.
    redemption: RedemptionInput | None = Field(
        None,
        description="A new policy, replacing the old one whole; null restores the type's defaults.",
    )


def _within_pass_limits(
    field_values: dict[str, str] | None, metadata: dict[str, Any] | None
) -> None:
    """shared/pass_limits.py, raised as the API error itself so that it names the param."""
    problem = field_values_problem(field_values or {}) or metadata_problem(metadata or {})
    if problem is not None:
        param, message = problem
        raise InvalidRequest(message, param=param, code="parameter_too_large")


class PassCreate(_Body):
    template_id: str = Field(
        max_length=100,
        description="The template to issue the pass from (`tmpl_...`); it must not be archived.",
    )
    holder_email: EmailStr | None = Field(None, description="The holder's email address.")
    holder_name: str | None = Field(
        None,
        max_length=MAX_HOLDER_NAME_CHARS,
        description="The holder's name, up to 200 characters.",
    )
    field_values: dict[str, str] = Field(
        default_factory=dict,
        max_length=100,
        description="Values of the template's fields, by field key (strings); a field left "
        "out shows its default.",
    )
    metadata: dict[str, Any] = Field(
        default_factory=dict,
        max_length=MAX_METADATA_KEYS,
        description="Your own data about the pass: up to 50 keys, any JSON values; never "
        "shown to the holder.",
    )

    @model_validator(mode="after")
    def _bounded(self) -> "PassCreate":
        _within_pass_limits(self.field_values, self.metadata)
        return self


class PassUpdate(_Body):
    holder_email: EmailStr | None = Field(
        None, description="A corrected email address of the holder; null removes it."
    )
    holder_name: str | None = Field(
        None,
        max_length=MAX_HOLDER_NAME_CHARS,
        description="A corrected name of the holder; null removes it. Pushed like a field.",
    )
    field_values: dict[str, str | None] | None = Field(
        None,
        max_length=100,
        description="Values to change, by field key; a null value removes the pass's own "
        "value, so the field shows its template default again.",
    )
    metadata: dict[str, Any] | None = Field(
        None,
        max_length=MAX_METADATA_KEYS,
        description="Keys to set; a null value removes the key.",
    )

    @model_validator(mode="after")
    def _something(self) -> "PassUpdate":
        if not self.model_fields_set & PASS_UPDATE_FIELDS:
            raise ValueError("send holder_name, holder_email, field_values or metadata")
        for name in ("field_values", "metadata"):
            if name in self.model_fields_set and getattr(self, name) is None:
                raise InvalidRequest(
                    f"{name} is an object; send null for a single key to remove it.",
                    param=name,
                    code="parameter_invalid",
                )
        # Null values delete keys; what they would merge into is checked by the issuer.
        values = {k: v for k, v in (self.field_values or {}).items() if v is not None}
        present = {k: v for k, v in (self.metadata or {}).items() if v is not None}
        _within_pass_limits(values, present)
        return self


PASS_UPDATE_FIELDS = frozenset({"holder_email", "holder_name", "field_values", "metadata"})
HOLDER_FIELDS = ("holder_email", "holder_name")


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
WEBHOOK_URL_HELP = "Where deliveries are posted: an absolute http(s) URL of a public address."
WEBHOOK_EVENTS_HELP = (
    "Webhook event types to deliver: `pass.issued`, `pass.add_intent`, `pass.added_to_wallet`, "
    "`pass.update_pushed`, `pass.update_delivered`, `pass.removed`, `pass.voided`, "
    "`pass.redeemed`, or `*` for all."
)


class WebhookCreate(_Body):
    url: str = Field(
        min_length=1,
        max_length=2048,
        description=WEBHOOK_URL_HELP,
    )
    events: list[WebhookEventType] = Field(
        min_length=1,
        max_length=20,
        description=WEBHOOK_EVENTS_HELP,
    )
    description: str | None = Field(
        None, max_length=500, description="Your description, up to 500 characters."
    )
    enabled: StrictBool = Field(True, description="Whether deliveries are sent.")
    max_deliveries_per_second: MaxDeliveriesPerSecond = THROTTLE

    _events = field_validator("events", mode="before")(_webhook_events)
    _url = field_validator("url")(_webhook_url)


class WebhookUpdate(_Body):
    url: str | None = Field(
        None,
        min_length=1,
        max_length=2048,
        description=WEBHOOK_URL_HELP,
    )
    events: list[WebhookEventType] | None = Field(
        None,
        min_length=1,
        max_length=20,
        description=WEBHOOK_EVENTS_HELP,
    )
    description: str | None = Field(
        None, max_length=500, description="Your description, up to 500 characters."
    )
    enabled: StrictBool | None = Field(
        None,
        description="false pauses deliveries; true resumes them (and clears a disable by Tessera).",
    )
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
    name: str = Field(
        min_length=1, max_length=200, description="The account's name, 1 to 200 characters."
    )
    plan: Literal["free", "paid"] = Field(description="`free` (test keys only) or `paid`.")


class AccountUpdate(_Body):
    plan: Literal["free", "paid"] = Field(description="The new plan: `free` or `paid`.")


class ApiKeyCreate(_Body):
    mode: Mode = Field(description="The key's mode: `test` or `live`.")


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
    pass_id: str | None = Field(
        None, max_length=100, description="The pass to scan, instead of `code`."
    )
    location: str | None = Field(
        None,
        max_length=MAX_LOCATION_CHARS,
        description="Where it was scanned, e.g. `North gate` (up to 200 characters).",
    )
    metadata: dict[str, Any] = Field(
        default_factory=dict,
        max_length=MAX_METADATA_KEYS,
        description="Your own data about the scan, with the limits of pass metadata.",
    )

    @model_validator(mode="after")
    def _one_of(self) -> "ScanCreate":
        if (self.code is None) == (self.pass_id is None):
            raise InvalidRequest(
                "Send exactly one of code and pass_id.", param="code", code="parameter_invalid"
            )
        _within_pass_limits(None, self.metadata)
        return self


class ScannerKeyCreate(_Body):
    name: str = Field(
        min_length=1,
        max_length=100,
        description="A name for the device or gate, 1 to 100 characters.",
    )
