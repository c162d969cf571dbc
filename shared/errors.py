"""One error hierarchy for the whole service, rendered as the spec's error envelope.

`ApiError` carries everything the envelope needs; services raise the subclasses and the api's
one exception handler (and the NATS reply wrapper) turn them into
`{"error": {"type", "code", "message", "param"}}`.
"""

from typing import Any, ClassVar


class ApiError(Exception):
    type: ClassVar[str] = "api_error"
    status: ClassVar[int] = 500

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None):
        super().__init__(message)
        self.message = message
        self.param = param
        self.code = code

    def envelope(self) -> dict[str, Any]:
        return {
            "error": {
                "type": self.type,
                "code": self.code,
                "message": self.message,
                "param": self.param,
            }
        }


class InvalidRequest(ApiError):
    type = "invalid_request_error"
    status = 400


class PayloadTooLarge(InvalidRequest):
    status = 413


class UnsupportedMediaType(InvalidRequest):
    status = 415


class AuthenticationError(ApiError):
    type = "authentication_error"
    status = 401


class AuthorizationError(ApiError):
    type = "authorization_error"
    status = 403


class BillingError(ApiError):
    type = "billing_error"
    status = 402


class NotFound(ApiError):
    type = "not_found_error"
    status = 404


class MethodNotAllowed(ApiError):
    type = "invalid_request_error"
    status = 405


class IdempotencyConflict(ApiError):
    type = "idempotency_error"
    status = 409


class RateLimited(ApiError):
    type = "rate_limit_error"
    status = 429


class InternalError(ApiError):
    pass


_BY_TYPE_AND_STATUS: dict[tuple[str, int], type[ApiError]] = {
    (cls.type, cls.status): cls
    for cls in (
        InvalidRequest,
        PayloadTooLarge,
        UnsupportedMediaType,
        AuthenticationError,
        AuthorizationError,
        BillingError,
        NotFound,
        MethodNotAllowed,
        IdempotencyConflict,
        RateLimited,
        InternalError,
    )
}


def error_from_wire(
    type_: str, status: int, message: str, param: str | None, code: str | None
) -> ApiError:
    """Rebuild an ApiError that crossed NATS in a reply."""
    cls = _BY_TYPE_AND_STATUS.get((type_, status), InternalError)
    return cls(message, param=param, code=code)


def not_found(kind: str, object_id: str, param: str | None = None) -> NotFound:
    return NotFound(f"No such {kind}: '{object_id}'", param=param, code="resource_missing")


def pass_voided(pass_id: str) -> InvalidRequest:
    """A change to a voided pass (a PATCH, or a job's change of it)."""
    return InvalidRequest(
        f"Pass '{pass_id}' is voided and can no longer be updated.", code="pass_voided"
    )
