"""Runs one service's app under uvicorn: `python -m services.<name>`.

The listening sockets are made here rather than by uvicorn, so several replicas of a service can
share its port: with TESSERA_REUSE_PORT each binds it with SO_REUSEPORT (Linux spreads new
connections across them), and with TESSERA_REPLICA_PORT each also listens on a port of its own,
serving the same app, so one replica's /readyz and /metrics can be reached (docs/scaling.md).
Without either setting there is one plain socket, as uvicorn would make.
"""

import logging
import socket
import sys
from collections.abc import Callable

import uvicorn
from fastapi import FastAPI

from shared.apple_certificates import SigningIdentityError
from shared.http_date import FreshDate
from shared.http_protocol import with_header_deadline
from shared.logs import configure_logging
from shared.settings import ServiceSettings

log = logging.getLogger(__name__)
# uvicorn's exit code when the app's startup failed.
STARTUP_FAILURE = 3


def bind(host: str, port: int, *, reuse_port: bool = False) -> socket.socket:
    """A bound TCP socket, not yet listening: it joins the port's SO_REUSEPORT group, and so
    receives connections, only once the server listens on it, after the app has started."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named explicitly: asyncio sets TCP_NODELAY only on sockets whose proto says
    # TCP, and without it Nagle's algorithm meets delayed ACKs: 40 ms on every response.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


def listening_sockets(settings: ServiceSettings, port: int) -> list[socket.socket]:
    sockets = [bind(settings.host, port, reuse_port=settings.reuse_port)]
    if settings.replica_port is not None:
        try:
            sockets.append(bind(settings.host, settings.replica_port))
        except OSError:
            sockets[0].close()
            raise
    return sockets


def created_or_exit(
    service: str, create: Callable[[], FastAPI], settings: ServiceSettings
) -> FastAPI:
    """`create()`, or exit with STARTUP_FAILURE and one line that names a configuration
    mistake found while creating the app (an unusable signing identity), with no traceback."""
    try:
        return create()
    except SigningIdentityError as exc:
        configure_logging(service, settings.log_level, settings.replica)
        log.critical("cannot start: %s", exc)
        sys.exit(STARTUP_FAILURE)


def serve(service: str, app: FastAPI, settings: ServiceSettings, port: int) -> None:
    configure_logging(service, settings.log_level, settings.replica)
    try:
        sockets = listening_sockets(settings, port)
    except OSError as exc:
        log.error("cannot listen on %s: %s", settings.host, exc)
        sys.exit(STARTUP_FAILURE)
    log.info("listening on %s", _described(settings, port))
    config = uvicorn.Config(
        FreshDate(app),
        host=settings.host,
        port=port,
        log_config=None,
        access_log=False,
        lifespan="on",
        http=with_header_deadline(settings.header_timeout_seconds),
        date_header=False,  # FreshDate's instead: current, and never a second one
    )
    server = uvicorn.Server(config)
    try:
        server.run(sockets=sockets)
    finally:
        for sock in sockets:
            sock.close()
    if not server.started:
        sys.exit(STARTUP_FAILURE)


def _described(settings: ServiceSettings, port: int) -> str:
    where = f"{settings.host}:{port}" + (" (shared, SO_REUSEPORT)" if settings.reuse_port else "")
    if settings.replica_port is not None:
        where += f" and {settings.host}:{settings.replica_port} (this replica's own)"
    return where
