"""How an error is written depends on the interface it answers.

The v1 API answers the spec's envelope `{"error": {"type", "code", "message", "param"}}` with the
error's status. Variant A (`POST /passes`, spec 4.2) declares only 400, 401, 404 and 500, each
with `{"message"}`: other 4xx statuses fold into 400, 403 (a live key on a free plan) into 401,
and 5xx into 500.
"""

from typing import Any

from shared.errors import ApiError

VARIANT_A_PATH = "/passes"


def error_body(path: str, error: ApiError) -> tuple[int, dict[str, Any]]:
    if path.rstrip("/") != VARIANT_A_PATH:
        return error.status, error.envelope()
    if error.status >= 500:
        return 500, {"message": error.message}
    status = {401: 401, 403: 401, 404: 404}.get(error.status, 400)
    return status, {"message": error.message}
