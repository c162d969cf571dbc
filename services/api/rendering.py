"""How an error is written depends on the interface it answers.

The v1 API answers the spec's envelope `{"error": {"type", "code", "message", "param"}}` with the
error's status. Variant A (`POST /passes`, spec 4.2) declares only 400, 401, 404 and 500, each
with `{"message"}`: a 403 that refuses the key itself (a live key on a free plan, a scanner
key) is 401, other 4xx statuses fold into 400 (a 403 such as "no production credentials"
included), and 5xx into 500.
"""

from typing import Any

from shared.errors import ApiError

VARIANT_A_PATH = "/passes"
# The 403s that refuse the key itself, which Variant A says with its 401.
KEY_REFUSALS = frozenset({"live_mode_requires_paid_plan", "scanner_key_not_allowed"})


def error_body(path: str, error: ApiError) -> tuple[int, dict[str, Any]]:
    if path.rstrip("/") != VARIANT_A_PATH:
        return error.status, error.envelope()
    if error.status >= 500:
        return 500, {"message": error.message}
    if error.status == 403:
        return (401 if error.code in KEY_REFUSALS else 400), {"message": error.message}
    status = {401: 401, 404: 404}.get(error.status, 400)
    return status, {"message": error.message}
