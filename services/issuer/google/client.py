"""A small async client of the Google Wallet REST API (walletobjects v1), OAuth2 included.

Hand-written rather than google-api-python-client: that library is synchronous and pulls in a
large dependency tree for the few calls made here. Create it in a lifespan and close it there
with `aclose()`; docs/google-wallet.md describes the token flow and the errors.
"""

import asyncio
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, Final, Self
from urllib.parse import quote

import httpx2
import jwt

from services.issuer.google.identity import GoogleIdentity
from services.issuer.google.objects import VERTICALS, class_update

DEFAULT_API_BASE_URL: Final = "https://walletobjects.googleapis.com/walletobjects/v1"
WALLET_SCOPE: Final = "https://www.googleapis.com/auth/wallet_object.issuer"
_JWT_BEARER: Final = "urn:ietf:params:oauth:grant-type:jwt-bearer"
_ASSERTION_LIFETIME_SECONDS: Final = 3600
# Renew this long before expiry, so a token never lapses between the check and Google's.
_TOKEN_REFRESH_MARGIN_SECONDS: Final = 60.0


class GoogleWalletError(Exception):
    """Any failure to get an answer we can use from Google."""


class WalletApiError(GoogleWalletError):
    """Google (its API or its token endpoint) answered with an error status."""

    def __init__(self, status: int, message: str, reason: str | None = None) -> None:
        super().__init__(f"Google Wallet API error {status}: {message}")
        self.status = status
        self.message = message
        self.reason = reason  # e.g. "resourceNotFound", "invalid_grant"


class WalletUnavailable(GoogleWalletError):
    """No answer: connection failure or timeout."""


class WalletRestClient:
    def __init__(
        self,
        identity: GoogleIdentity,
        *,
        api_base_url: str = DEFAULT_API_BASE_URL,
        token_uri: str | None = None,
        timeout_seconds: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`token_uri` overrides the identity's (tests point both URLs at a local fake)."""
        self._identity = identity
        self._base_url = api_base_url.rstrip("/")
        self._token_uri = token_uri or identity.token_uri
        self._clock = clock
        self._http = httpx2.AsyncClient(
            timeout=httpx2.Timeout(timeout_seconds, connect=min(timeout_seconds, 5.0))
        )
        self._token: str | None = None
        self._token_expires_at = 0.0
        self._token_lock = asyncio.Lock()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def upsert_class(self, vertical: str, resource: dict[str, Any]) -> dict[str, Any]:
        """Insert the class, or replace it when it exists, keeping the fields its design does
        not decide as they are at Google (objects.class_update); returns Google's resource."""
        return await self._upsert(_collection(vertical, "Class"), resource, class_update)

    async def upsert_object(self, vertical: str, resource: dict[str, Any]) -> dict[str, Any]:
        """Insert the object, or replace it when it exists; returns Google's resource."""
        return await self._upsert(_collection(vertical, "Object"), resource)

    async def patch_object(self, vertical: str, resource: dict[str, Any]) -> dict[str, Any]:
        """Patch an existing object (WalletApiError 404 when Google has none)."""
        path = f"/{_collection(vertical, 'Object')}/{quote(resource['id'], safe='')}"
        return await self._required("PATCH", path, resource)

    async def _upsert(
        self,
        collection: str,
        resource: dict[str, Any],
        update: Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        path = f"/{collection}/{quote(resource['id'], safe='')}"
        stored = await self._call("GET", path, missing_ok=True)
        if stored is None:
            try:
                return await self._required("POST", f"/{collection}", resource)
            except WalletApiError as exc:
                # Another issuer process inserted it between our GET and POST: update instead
                # (with what that process sent, so nobody else's fields are there yet).
                if exc.status != 409:
                    raise
        # `update` (PUT), not `patch`: Google's patch keeps every field the body leaves out, so
        # a holder's name, seat or barcode removed from the pass (a PATCH to null, a
        # redaction) would have stayed on the Google object.
        body = resource if stored is None or update is None else update(stored, resource)
        return await self._required("PUT", path, body)

    async def _required(self, method: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
        result = await self._call(method, path, body=body)
        assert result is not None  # only GET with missing_ok answers None
        return result

    async def _call(
        self,
        method: str,
        path: str,
        *,
        body: dict[str, Any] | None = None,
        missing_ok: bool = False,
    ) -> dict[str, Any] | None:
        for attempt in range(2):
            headers = {"Authorization": f"Bearer {await self._access_token()}"}
            response = await self._send(method, self._base_url + path, json=body, headers=headers)
            # A token revoked or expired early: forget it and try once more with a fresh one.
            if response.status_code == 401 and attempt == 0:
                self._token = None
                continue
            if response.status_code == 404 and missing_ok:
                return None
            if response.is_success:
                return _json_object(response)
            raise _api_error(response)
        raise AssertionError("unreachable: the loop returns or raises")

    async def _access_token(self) -> str:
        async with self._token_lock:
            if self._token is not None and self._clock() < self._token_expires_at:
                return self._token
            response = await self._send(
                "POST",
                self._token_uri,
                data={"grant_type": _JWT_BEARER, "assertion": self._assertion()},
            )
            if not response.is_success:
                raise _api_error(response)
            answer = _json_object(response)
            token = answer.get("access_token")
            if not isinstance(token, str) or not token:
                raise WalletApiError(response.status_code, "token response has no access_token")
            lifetime = float(answer.get("expires_in", _ASSERTION_LIFETIME_SECONDS))
            self._token = token
            self._token_expires_at = self._clock() + lifetime - _TOKEN_REFRESH_MARGIN_SECONDS
            return token

    def _assertion(self) -> str:
        now = int(time.time())
        claims = {
            "iss": self._identity.client_email,
            "scope": WALLET_SCOPE,
            "aud": self._token_uri,
            "iat": now,
            "exp": now + _ASSERTION_LIFETIME_SECONDS,
        }
        key_id = {"kid": self._identity.private_key_id}
        return jwt.encode(claims, self._identity.private_key, algorithm="RS256", headers=key_id)

    async def _send(self, method: str, url: str, **kwargs: Any) -> httpx2.Response:
        try:
            return await self._http.request(method, url, **kwargs)
        except httpx2.TransportError as exc:
            raise WalletUnavailable(f"{method} {url}: {type(exc).__name__}: {exc}") from exc


def _collection(vertical: str, kind: str) -> str:
    if vertical not in VERTICALS:
        raise ValueError(f"vertical must be one of {VERTICALS}, got {vertical!r}")
    return f"{vertical}{kind}"


def _json_object(response: httpx2.Response) -> dict[str, Any]:
    try:
        answer = response.json()
    except ValueError as exc:
        raise WalletApiError(response.status_code, f"answer is not JSON: {exc}") from exc
    if not isinstance(answer, dict):
        raise WalletApiError(response.status_code, "answer is not a JSON object")
    return answer


def _api_error(response: httpx2.Response) -> WalletApiError:
    """Read Google's error envelope: {"error": {"code", "message", "errors": [{"reason"}]}}.

    The token endpoint answers the OAuth2 shape instead: {"error", "error_description"}.
    """
    try:
        answer = response.json()
    except ValueError:
        return WalletApiError(response.status_code, response.text[:500] or response.reason_phrase)
    error = answer.get("error") if isinstance(answer, dict) else None
    if isinstance(error, dict):
        details = error.get("errors")
        first = details[0] if isinstance(details, list) and details else {}
        reason = first.get("reason") if isinstance(first, dict) else None
        return WalletApiError(
            response.status_code, str(error.get("message", "")), reason or error.get("status")
        )
    if isinstance(error, str):
        description = answer.get("error_description", error)
        return WalletApiError(response.status_code, str(description), error)
    return WalletApiError(response.status_code, response.text[:500])
