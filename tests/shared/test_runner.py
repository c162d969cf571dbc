"""The sockets a service listens on: one plain socket by default; with several replicas, the
service's port shared through SO_REUSEPORT plus a port of the replica's own."""

import asyncio
import json
import logging
import socket

import pytest

from shared.logs import JsonFormatter
from shared.runner import bind, listening_sockets
from shared.settings import ServiceSettings
from tessera.processes import free_port


def _settings(**values: object) -> ServiceSettings:
    return ServiceSettings.model_validate({"host": "127.0.0.1", **values})


def test_by_default_one_socket_without_reuse_port() -> None:
    port = free_port()
    sockets = listening_sockets(_settings(), port)
    try:
        assert [sock.getsockname()[1] for sock in sockets] == [port]
        assert sockets[0].getsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT) == 0
        sockets[0].listen()
        with pytest.raises(OSError, match="in use"):
            bind("127.0.0.1", port, reuse_port=True)
    finally:
        for sock in sockets:
            sock.close()


def test_replicas_share_the_port_and_each_has_its_own() -> None:
    port = free_port()
    own = [free_port(), free_port()]
    replicas = [
        listening_sockets(_settings(reuse_port=True, replica_port=mine), port) for mine in own
    ]
    try:
        for sockets, mine in zip(replicas, own, strict=True):
            assert [sock.getsockname()[1] for sock in sockets] == [port, mine]
            assert sockets[0].getsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT) == 1
            sockets[0].listen()  # both listen on the shared port at once
    finally:
        for sockets in replicas:
            for sock in sockets:
                sock.close()


def test_log_lines_name_the_replica_only_when_there_is_one() -> None:
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "hello", None, None)
    assert "replica" not in json.loads(JsonFormatter("issuer").format(record))
    line = json.loads(JsonFormatter("issuer", "issuer-2").format(record))
    assert (line["service"], line["replica"]) == ("issuer", "issuer-2")


async def test_accepted_connections_get_tcp_nodelay() -> None:
    """Without TCP_NODELAY, Nagle's algorithm and delayed ACKs add 40 ms to responses."""
    sock = bind("127.0.0.1", 0)  # the port the system picks, read back below
    seen: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    class Probe(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            accepted = transport.get_extra_info("socket")
            seen.set_result(accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            transport.close()

    server = await asyncio.get_running_loop().create_server(Probe, sock=sock)
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", sock.getsockname()[1])
        assert await asyncio.wait_for(seen, 5) != 0
        writer.close()
    finally:
        server.close()
        await server.wait_closed()
