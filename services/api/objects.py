"""The spec's objects as pydantic models, for the OpenAPI document (`/docs`, `/openapi.json`).

Endpoints build their bodies with the shaping functions in schemas.py; these models describe
those bodies and the error envelope to clients and code generators.
"""

from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel

T = TypeVar("T")


class ErrorBody(BaseModel):
    type: str
    code: str | None
    message: str
    param: str | None


class ErrorEnvelope(BaseModel):
    error: ErrorBody


class TemplateObject(BaseModel):
    id: str
    object: Literal["template"]
    name: str
    type: str
    apple_style: str
    design: dict[str, Any]
    archived: bool
    require_download_link: bool
    created_at: str
    updated_at: str


class PassObject(BaseModel):
    id: str
    object: Literal["pass"]
    short_id: str
    template_id: str
    serial_number: str
    mode: Literal["test", "live"]
    holder_email: str | None
    holder_name: str | None
    field_values: dict[str, str]
    voided: bool
    voided_at: str | None
    metadata: dict[str, Any]
    created_via_api: bool
    url: str
    download_url: str
    created_at: str


class PassEventObject(BaseModel):
    id: str
    object: Literal["pass_event"]
    pass_id: str
    type: str
    metadata: dict[str, Any]
    created_at: str


class DownloadLinkObject(BaseModel):
    object: Literal["pass.download_link"]
    pass_id: str
    url: str
    expires_in: int
    expires_at: str
    created_at: str


class WebhookObject(BaseModel):
    id: str
    object: Literal["webhook"]
    url: str
    events: list[str]
    description: str | None
    enabled: bool
    created_at: str


class WebhookWithSecret(WebhookObject):
    secret: str


class DeliveryObject(BaseModel):
    id: str
    object: Literal["webhook_delivery"]
    webhook_id: str
    event_type: str
    status: Literal["pending", "delivered", "failed", "dead"]
    attempts: int
    last_attempt_at: str | None
    next_attempt_at: str | None
    response_status: int | None
    response_body: str | None
    created_at: str


class ListObject(BaseModel, Generic[T]):
    object: Literal["list"]
    data: list[T]
    has_more: bool


class DeletedObject(BaseModel):
    id: str
    deleted: Literal[True]


_ERRORS: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "authorization_error",
    404: "not_found_error",
    402: "billing_error",
    409: "idempotency_error",
    429: "rate_limit_error",
    500: "api_error",
}


def responses(model: type[BaseModel], *errors: int) -> dict[int | str, dict[str, Any]]:
    """The `responses=` of a route: its success body and the error envelopes it can answer."""
    documented: dict[int | str, dict[str, Any]] = {200: {"model": model}}
    # Every authenticated operation can be rate limited (docs/plans-and-limits.md).
    for status in (*(errors or (400, 401, 403, 404, 500)), 429):
        documented[status] = {"model": ErrorEnvelope, "description": _ERRORS[status]}
    return documented
