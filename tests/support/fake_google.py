"""A local fake of Google's OAuth2 token endpoint and the Wallet REST API (walletobjects v1).

It is a real HTTP server (Starlette under uvicorn, in a background thread) on 127.0.0.1, so the
client under test goes through its whole HTTP stack. It speaks Google's shapes:

- `POST /token`: the JWT-bearer grant. The assertion is verified with google-auth (an
  implementation independent of ours) against the registered service account's public key.
- `GET|PATCH|PUT /walletobjects/v1/<vertical>Class|Object/<id>`, `POST .../<collection>`:
  in-memory storage, Bearer token required, Google's error envelope for 400/401/404/409.

An optional `validate(schema_name, resource) -> list[str]` hook rejects resources the way
Google rejects unknown or mistyped fields (400).
"""

import asyncio
import copy
import secrets
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qs

import uvicorn
from google.auth import jwt as google_jwt
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.support.polling import poll

WALLET_PREFIX = "/walletobjects/v1"
WALLET_SCOPE = "https://www.googleapis.com/auth/wallet_object.issuer"
VERTICALS = ("eventTicket", "loyalty", "offer", "generic")
COLLECTIONS = {f"{v}{kind}": (v, kind) for v in VERTICALS for kind in ("Class", "Object")}
Validator = Callable[[str, dict[str, Any]], list[str]]


class FakeGoogle:
    """State of the fake; tests read `classes`, `objects`, `token_requests` and `requests`."""

    def __init__(self, validate: Validator | None = None) -> None:
        self.base_url = ""  # set once the server listens
        self.validate = validate
        self.accounts: dict[str, bytes] = {}  # client_email -> public key PEM
        self.classes: dict[str, dict[str, Any]] = {}  # class id -> stored resource
        self.objects: dict[str, dict[str, Any]] = {}
        self.tokens: set[str] = set()
        self.token_requests = 0
        self.requests: list[tuple[str, str]] = []  # (method, path) of wallet API calls
        # Ids whose GET answers 404 although stored: another writer inserted them just after.
        self.stale_reads: set[str] = set()
        # While set, every Wallet API call answers this status (an outage of Google's API).
        self.outage_status: int | None = None
        # Seconds every Wallet API call takes before it is answered (a slow Google).
        self.delay_seconds = 0.0
        self._lock = threading.Lock()

    @property
    def token_uri(self) -> str:
        return f"{self.base_url}/token"

    @property
    def api_base_url(self) -> str:
        return f"{self.base_url}{WALLET_PREFIX}"

    def register(self, client_email: str, public_key_pem: bytes) -> None:
        with self._lock:
            self.accounts[client_email] = public_key_pem

    def object_of(
        self, pass_id: str, done: Callable[[dict[str, Any]], object] = bool
    ) -> dict[str, Any]:
        """The stored object of a pass once `done(object)` holds: the issuer's Google step
        upserts it after the pass is committed, so tests wait for it."""

        def stored() -> dict[str, Any]:
            with self._lock:
                suffix = pass_id.split("_", 1)[1]  # object ids: <issuer id>.<pass id's suffix>
                found = [o for key, o in self.objects.items() if suffix in key]
            return copy.deepcopy(found[0]) if found else {}

        return poll(stored, done, message=f"the Google object of {pass_id}")

    def revoke_tokens(self) -> None:
        with self._lock:
            self.tokens.clear()

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/token", self._token, methods=["POST"]),
                Route(WALLET_PREFIX + "/{collection}", self._insert, methods=["POST"]),
                Route(
                    WALLET_PREFIX + "/{collection}/{resource_id}",
                    self._resource,
                    methods=["GET", "PATCH", "PUT"],
                ),
            ]
        )

    async def _token(self, request: Request) -> JSONResponse:
        # Parsed by hand: Starlette's request.form() needs python-multipart, which we don't.
        form = {key: values[0] for key, values in parse_qs((await request.body()).decode()).items()}
        with self._lock:
            self.token_requests += 1
        if form.get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer":
            return _oauth_error("unsupported_grant_type", "Invalid grant_type.")
        assertion = form.get("assertion")
        if not isinstance(assertion, str):
            return _oauth_error("invalid_request", "Missing required parameter: assertion")
        try:
            unverified = google_jwt.decode(assertion, verify=False)
            public_key = self.accounts[unverified["iss"]]
            claims = google_jwt.decode(
                assertion, certs=public_key.decode(), audience=self.token_uri
            )
        except (KeyError, ValueError) as exc:
            return _oauth_error("invalid_grant", f"Invalid JWT Signature. ({exc})")
        if WALLET_SCOPE not in str(claims.get("scope", "")).split():
            return _oauth_error("invalid_scope", "Invalid OAuth scope or ID token audience.")
        token = "ya29.fake-" + secrets.token_urlsafe(24)
        with self._lock:
            self.tokens.add(token)
        return JSONResponse({"access_token": token, "expires_in": 3599, "token_type": "Bearer"})

    async def _insert(self, request: Request) -> JSONResponse:
        collection = request.path_params["collection"]
        return await self._handle(request, collection, None)

    async def _resource(self, request: Request) -> JSONResponse:
        params = request.path_params
        return await self._handle(request, params["collection"], params["resource_id"])

    async def _handle(
        self, request: Request, collection: str, resource_id: str | None
    ) -> JSONResponse:
        with self._lock:
            self.requests.append((request.method, request.url.path))
            authorized = request.headers.get("authorization", "").removeprefix("Bearer ")
            if authorized not in self.tokens:
                return _error(
                    401,
                    "Request had invalid authentication credentials.",
                    "authError",
                    "UNAUTHENTICATED",
                )
        if self.outage_status is not None:
            return _error(self.outage_status, "Internal error encountered.", "backendError", None)
        if self.delay_seconds:
            await asyncio.sleep(self.delay_seconds)
        if collection not in COLLECTIONS:
            return _error(404, f"Not Found: {collection}", "notFound", "NOT_FOUND")
        try:
            body = None if request.method == "GET" else await request.json()
        except ValueError:
            return _error(400, "Invalid JSON payload received.", "parseError", "INVALID_ARGUMENT")
        with self._lock:
            return self._apply(request.method, collection, resource_id, body)

    def _apply(
        self, method: str, collection: str, resource_id: str | None, body: Any
    ) -> JSONResponse:
        vertical, kind = COLLECTIONS[collection]
        store = self.classes if kind == "Class" else self.objects
        if method == "GET":
            assert resource_id is not None
            if resource_id not in store or resource_id in self.stale_reads:
                return _not_found(resource_id)
            return JSONResponse(store[resource_id])
        if not isinstance(body, dict):
            return _error(400, "Invalid JSON payload received.", "invalid", "INVALID_ARGUMENT")
        if method == "POST":
            resource = body
            resource_id = str(body.get("id", ""))
            if resource_id in store:
                return _error(409, f"Resource already exists: {resource_id}", "duplicate", None)
        else:
            assert resource_id is not None
            if resource_id not in store:
                return _not_found(resource_id)
            if "id" in body and body["id"] != resource_id:
                return _invalid(f"Resource id {body['id']} does not match {resource_id}")
            # PATCH merges the given top-level fields; PUT replaces the resource.
            resource = {**store[resource_id], **body} if method == "PATCH" else body
        problem = self._problem(vertical, kind, resource_id, resource)
        if problem is not None:
            return _invalid(problem)
        stored = {**copy.deepcopy(resource), "kind": f"walletobjects#{collection}"}
        store[resource_id] = stored
        return JSONResponse(stored)

    def _problem(
        self, vertical: str, kind: str, resource_id: str, resource: dict[str, Any]
    ) -> str | None:
        issuer, _, suffix = resource_id.partition(".")
        if not (issuer.isdigit() and suffix) or any(
            not (c.isalnum() or c in "._-") for c in suffix
        ):
            return f"Invalid resource ID: {resource_id}"
        if kind == "Object" and resource.get("classId") not in self.classes:
            return f"Class {resource.get('classId')} for object {resource_id} does not exist."
        if self.validate is not None:
            schema = vertical[0].upper() + vertical[1:] + kind
            errors = self.validate(schema, {k: v for k, v in resource.items() if k != "kind"})
            if errors:
                return "Invalid JSON payload received. " + "; ".join(errors)
        return None


def _error(status: int, message: str, reason: str, grpc_status: str | None) -> JSONResponse:
    error: dict[str, Any] = {
        "code": status,
        "message": message,
        "errors": [{"message": message, "domain": "walletobjects", "reason": reason}],
    }
    if grpc_status is not None:
        error["status"] = grpc_status
    return JSONResponse({"error": error}, status_code=status)


def _not_found(resource_id: str) -> JSONResponse:
    return _error(404, f"Resource not found: {resource_id}", "resourceNotFound", "NOT_FOUND")


def _invalid(message: str) -> JSONResponse:
    return _error(400, message, "invalidResource", "INVALID_ARGUMENT")


def _oauth_error(error: str, description: str) -> JSONResponse:
    return JSONResponse({"error": error, "error_description": description}, status_code=400)


@contextmanager
def running_fake_google(validate: Validator | None = None) -> Iterator[FakeGoogle]:
    """Serve a FakeGoogle on 127.0.0.1 (a free port) for the duration of the block."""
    fake = FakeGoogle(validate)
    with serving_app(fake.app(), "fake-google") as base_url:
        fake.base_url = base_url
        yield fake


@contextmanager
def serving_app(app: Starlette, name: str) -> Iterator[str]:
    """Serve an app with uvicorn in a background thread on 127.0.0.1 (a free port) for the
    duration of the block; yields its base URL."""
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name=name, daemon=True)
    thread.start()
    try:
        poll(lambda: server.started or not thread.is_alive(), message=f"{name} to start")
        if not server.started:
            raise RuntimeError(f"{name} did not start (see uvicorn's log)")
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
