"""A local stand-in for Google's root signing keys endpoint (`GET /gp/m/issuer/keys`).

A real HTTP server on 127.0.0.1 (tests/support/fake_google.py's `serving_app`), so the events
service fetches the keys through its whole HTTP stack. Tests set what it serves: the key list
(`serve`, from GoogleSigner.root_keys), the Cache-Control and Age headers, or a failing status,
and read how often it was asked (`fetches`).
"""

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.support.fake_google import serving_app

KEYS_PATH = "/gp/m/issuer/keys"


class FakeGoogleKeys:
    def __init__(self) -> None:
        self.base_url = ""  # set once the server listens
        self.document: dict[str, Any] = {"keys": []}
        self.headers: dict[str, str] = {}
        self.status = 200
        self.fetches = 0
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return self.base_url + KEYS_PATH

    def serve(
        self, document: dict[str, Any], headers: dict[str, str] | None = None, status: int = 200
    ) -> None:
        with self._lock:
            self.document, self.headers, self.status = document, headers or {}, status

    def app(self) -> Starlette:
        return Starlette(routes=[Route(KEYS_PATH, self._keys, methods=["GET"])])

    async def _keys(self, request: Request) -> Response:
        with self._lock:
            self.fetches += 1
            document, headers, status = self.document, self.headers, self.status
        if status != 200:
            return Response(b"unavailable", status_code=status)
        return Response(json.dumps(document), media_type="application/json", headers=headers)


@contextmanager
def running_fake_google_keys() -> Iterator[FakeGoogleKeys]:
    """Serve a FakeGoogleKeys for the duration of the block."""
    fake = FakeGoogleKeys()
    with serving_app(fake.app(), "fake-google-keys") as base_url:
        fake.base_url = base_url
        yield fake
