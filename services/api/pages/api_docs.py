"""The interactive API reference: Swagger UI at `/docs` and ReDoc at `/redoc` (docs/api-docs.md).

FastAPI's own pages load Swagger UI and ReDoc from a CDN, so they are blank without internet
and tell the CDN about every visitor. These load everything from Tessera: the two bundles come
from the pinned `fastapi-offline` package, which ships them, and the scripts that start them
from static/docs/ beside this module. So the pages' Content-Security-Policy can allow nothing
but Tessera's own origin: no inline script, no eval. What the two bundles still need is named
in the policy and its reason given: `data:` images (Swagger UI's icons are data: URIs in its
stylesheet), a nonce for the <style> elements ReDoc adds at run time, and `blob:` workers
(ReDoc builds its search index in a worker made from a blob). ReDoc's bundle is served with two
changes (`_PATCHES`) without which it would break that policy.
"""

import functools
import hashlib
import html
import secrets
from dataclasses import dataclass
from importlib import resources

DOCS_PATH = "/docs"
REDOC_PATH = "/redoc"
STATIC = "/static/docs/"
_JS = "text/javascript; charset=utf-8"

# Every file the two pages load, by name, with its media type and the package that holds it:
# a fixed list, not a directory listing.
ASSET_TYPES: dict[str, str] = {
    "swagger-ui-bundle.js": _JS,
    "swagger-ui.css": "text/css; charset=utf-8",
    "redoc.standalone.js": _JS,
    "swagger-init.js": _JS,
    "redoc-init.js": _JS,
}
_VENDORED = frozenset({"swagger-ui-bundle.js", "swagger-ui.css", "redoc.standalone.js"})
# ReDoc 2.5 as shipped needs 'unsafe-inline' styles and a CDN: its webpack bootstrap sets the
# style nonce to undefined, so the <style> it adds while loading (perfect-scrollbar's CSS) has
# none, and its menu shows Redocly's logo from cdn.redoc.ly. So the bundle takes the nonce of
# its own <script> element, and the logo is an empty data: URL (ReDoc drops an image that fails
# to load; the "API docs by Redocly" link stays). Each pattern must occur once.
_PATCHES: dict[str, tuple[tuple[bytes, bytes], ...]] = {
    "redoc.standalone.js": (
        (b"n.nc=void 0;", b"n.nc=document.currentScript&&document.currentScript.nonce||void 0;"),
        (b"https://cdn.redoc.ly/redoc/logo-mini.svg", b"data:,"),
    ),
}

_COMMON = (
    "default-src 'none'; script-src 'self'; img-src 'self' data:; font-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
# Swagger UI's "Try it out" calls the API on this origin (connect-src 'self').
SWAGGER_CSP = f"{_COMMON}; style-src 'self'"
_REDOC_CSP = f"{_COMMON}; style-src 'self' 'nonce-{{nonce}}'; worker-src blob:"
_HEADERS = {
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    # The document changes with every deployment; the pages are tiny.
    "Cache-Control": "no-cache",
}


@functools.cache
def asset(name: str) -> bytes:
    """The bytes of a file of ASSET_TYPES (KeyError for any other name)."""
    if name not in ASSET_TYPES:
        raise KeyError(name)
    if name in _VENDORED:
        folder = resources.files("fastapi_offline").joinpath("static")
    else:
        folder = resources.files("services.api.pages").joinpath("static", "docs")
    data = folder.joinpath(name).read_bytes()
    for old, new in _PATCHES.get(name, ()):
        if data.count(old) != 1:
            # Another version of the bundle: its policy needs looking at again.
            raise RuntimeError(f"{name}: {old!r} occurs {data.count(old)} times, not once")
        data = data.replace(old, new)
    return data


def asset_url(name: str, prefix: str = "") -> str:
    """Versioned by content, so a long cache lifetime never serves a stale file."""
    version = hashlib.sha256(asset(name)).hexdigest()[:12]
    return f"{prefix}{STATIC}{name}?v={version}"


@dataclass(frozen=True)
class DocsPage:
    """A page's HTML and the headers it is served with."""

    html: str
    headers: dict[str, str]


def swagger_page(prefix: str, openapi_url: str) -> DocsPage:
    """/docs: Swagger UI. `prefix` is the app's root path ("" unless behind a path prefix)."""
    body = (
        f'<div id="swagger-ui" data-openapi-url="{html.escape(openapi_url)}"></div>\n'
        f'<script src="{asset_url("swagger-ui-bundle.js", prefix)}"></script>\n'
        f'<script src="{asset_url("swagger-init.js", prefix)}"></script>\n'
    )
    stylesheet = f'<link rel="stylesheet" href="{asset_url("swagger-ui.css", prefix)}">\n'
    headers = {**_HEADERS, "Content-Security-Policy": SWAGGER_CSP}
    return DocsPage(_page("Tessera API reference", stylesheet, body), headers)


def redoc_page(prefix: str, openapi_url: str) -> DocsPage:
    """/redoc: ReDoc, with a new style nonce for every answer."""
    nonce = secrets.token_urlsafe(18)
    body = (
        f'<div id="redoc" data-openapi-url="{html.escape(openapi_url)}"></div>\n'
        f'<script src="{asset_url("redoc.standalone.js", prefix)}" nonce="{nonce}"></script>\n'
        f'<script src="{asset_url("redoc-init.js", prefix)}" nonce="{nonce}"></script>\n'
    )
    headers = {**_HEADERS, "Content-Security-Policy": redoc_csp(nonce)}
    return DocsPage(_page("Tessera API reference (ReDoc)", "", body), headers)


def redoc_csp(nonce: str) -> str:
    return _REDOC_CSP.format(nonce=nonce)


def _page(title: str, head: str, body: str) -> str:
    # An empty icon, so the browser does not ask for /favicon.ico (as the holder pages do).
    return (
        '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta name="referrer" content="no-referrer">\n'
        f"<title>{html.escape(title)}</title>\n"
        '<link rel="icon" href="data:,">\n'
        f"{head}</head>\n<body>\n{body}</body>\n</html>\n"
    )
