"""`tessera up`: the whole stack on one machine, with no Docker and no system service.

Starts nats-server (JetStream, store under DIR/nats) and secantusd-py (data under DIR/mongo)
unless TESSERA_NATS_URL / TESSERA_MONGODB_URL point elsewhere, then the four services. When all
answer /readyz it writes DIR/ready.json and prints a banner with a development test key.
With `--replicas N` every service runs N processes sharing its port (SO_REUSEPORT), each also
on a port of its own (`tessera.processes.Replica`), as docs/scaling.md describes.
A service process that dies is restarted on its own (at most MAX_RESTARTS times in
RESTART_WINDOW seconds, then the stack stops); if nats-server or secantusd-py dies, the stack
stops. SIGINT/SIGTERM stop every child within 9 seconds (services 6, then the store and nats
3) and remove ready.json. NATS and the store listen on loopback whatever --host says.
Before any of that it locks DIR (tessera/datalock.py): a second `tessera up` on the same
directory fails at once and touches nothing.
"""

import asyncio
import json
import os
import re
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

from cryptography.fernet import Fernet
from dotenv import dotenv_values
from rich.console import Console

from shared.settings import env_file
from tessera.datalock import DataDirBusy, lock_data_dir
from tessera.devaccount import ensure_dev_account
from tessera.logstream import LogStream
from tessera.nats_cluster import (
    NatsNode,
    client_urls,
    plan_nodes,
    routes,
    wait_meta_leader,
)
from tessera.processes import (
    PORT_OFFSETS,
    SERVICES,
    Child,
    Replica,
    base_env,
    free_port,
    mongo_argv,
    nats_argv,
    port_free,
    ports_needed,
    replicas_of,
    service_argv,
    stop_all,
    wait_ready,
    wait_tcp,
)

START_TIMEOUT = 90.0
_PASSWORD = re.compile(r"^([a-z][a-z0-9+.-]*://[^:/@]*:)[^@/]*@", re.IGNORECASE)
# Where the embedded NATS and store listen, whatever address the services bind.
LOOPBACK = "127.0.0.1"
MAX_RESTARTS = 5
RESTART_WINDOW = 60.0


class Stop(Exception):
    pass


def _on_signal(signum: int, frame: FrameType | None) -> None:
    raise Stop(signal.Signals(signum).name)


def _say(message: str) -> None:
    print(f"tessera: {message}", flush=True)


def _stack_env(
    data_dir: Path, host: str, port: int, nats_url: str, mongo_url: str
) -> dict[str, str]:
    env = base_env()
    env["TESSERA_NATS_URL"] = nats_url
    env["TESSERA_MONGODB_URL"] = mongo_url
    env["TESSERA_HOST"] = host
    public = url_host(host)
    env.setdefault("TESSERA_BASE_URL", f"http://{public}:{port}")
    env.setdefault("TESSERA_SITE_URL", f"http://{public}:{port}")
    env.setdefault("TESSERA_WALLET_URL", f"http://{public}:{port + PORT_OFFSETS['events']}")
    env.setdefault("TESSERA_DATA_DIR", str(data_dir))
    env.setdefault("TESSERA_WEBHOOKS_SECRET_KEY", webhooks_key(data_dir))
    # Local development sends webhooks to local receivers; production refuses private targets.
    env.setdefault("TESSERA_WEBHOOK_ALLOW_PRIVATE_NETWORKS", "true")
    for name in SERVICES:
        env[f"TESSERA_{name.upper()}_PORT"] = str(port + PORT_OFFSETS[name])
    return env


def webhooks_key(data_dir: Path) -> str:
    """The development key that encrypts webhook secrets at rest, made once per data dir."""
    path = data_dir / "webhooks-secret.key"
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(Fernet.generate_key())
    return path.read_text().strip()


def without_password(urls: str) -> str:
    """A server URL (or a comma-separated list) as the terminal may show it: a password in it
    becomes `***` (TESSERA_MONGODB_URL=mongodb://user:secret@...)."""
    return ",".join(_PASSWORD.sub(r"\1***@", url) for url in urls.split(","))


def url_host(host: str) -> str:
    """`host` as a URL names it: an unspecified address (0.0.0.0, ::) is reached through
    loopback, and an IPv6 address goes in brackets."""
    if host in ("0.0.0.0", "::"):  # the address --host binds, compared
        return LOOPBACK
    return f"[{host}]" if ":" in host else host


def _replicas(host: str, port: int, count: int) -> list[Replica]:
    replicas = [r for name in SERVICES for r in replicas_of(name, count, port)]
    if count > 1:
        # A replica that cannot bind its own port would exit and be restarted in a loop.
        busy = [r.port(port) for r in replicas if not port_free(r.port(port), host)]
        if busy:
            raise RuntimeError(
                f"--replicas {count} needs ports {port}-{port + ports_needed(count) - 1}; "
                f"in use: {', '.join(map(str, busy))}"
            )
    return replicas


def up(
    data_dir: Path,
    host: str,
    port: int,
    replicas: int = 1,
    *,
    stream_logs: bool = True,
    nats_nodes: int = 1,
) -> int:
    shown = data_dir
    data_dir = data_dir.resolve()
    try:
        lock = lock_data_dir(data_dir, shown)
    except DataDirBusy as busy:
        _say(str(busy))
        return 1
    try:
        return _up(data_dir, host, port, replicas, stream_logs, nats_nodes)
    finally:
        os.close(lock)


def _up(
    data_dir: Path, host: str, port: int, replicas: int, stream_logs: bool, nats_nodes: int
) -> int:
    ready_file = data_dir / "ready.json"
    ready_file.unlink(missing_ok=True)
    logs = data_dir / "logs"
    env = base_env()
    infra: list[Child] = []
    services: list[Child] = []
    # A closed terminal (SIGHUP) stops the stack as Ctrl-C does.
    for stopping in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(stopping, _on_signal)
    try:
        deadline = time.monotonic() + START_TIMEOUT
        members = _replicas(host, port, replicas)
        nats_url = env.get("TESSERA_NATS_URL")
        cluster: list[NatsNode] = []
        if not nats_url and nats_nodes > 1:
            # NATS and the store serve this stack's services only, which reach them over
            # loopback: bound there whatever --host says (neither asks for a password).
            cluster = plan_nodes(LOOPBACK, nats_nodes, data_dir)
            all_routes = routes(cluster)
            for node in cluster:
                log = logs / f"{node.name}.log"
                infra.append(
                    Child(node.name, node.argv(all_routes), env, log, dies_with_parent=True)
                )
            nats_url = client_urls(cluster)
        elif not nats_url:
            nats_port = free_port(LOOPBACK)
            infra.append(
                Child(
                    "nats",
                    nats_argv(LOOPBACK, nats_port, data_dir / "nats"),
                    env,
                    logs / "nats.log",
                    dies_with_parent=True,
                )
            )
            nats_url = f"nats://{LOOPBACK}:{nats_port}"
        mongo_url = env.get("TESSERA_MONGODB_URL")
        if not mongo_url:
            mongo_port = free_port(LOOPBACK)
            infra.append(
                Child(
                    "mongodb",
                    mongo_argv(LOOPBACK, mongo_port, data_dir / "mongo"),
                    env,
                    logs / "mongodb.log",
                    dies_with_parent=True,
                )
            )
            mongo_url = f"mongodb://{LOOPBACK}:{mongo_port}/?directConnection=true"
        for child in infra:
            child.start()
        for child in infra:
            port_ = int(
                child.argv[child.argv.index("--port" if child.name == "mongodb" else "-p") + 1]
            )
            wait_tcp(LOOPBACK, port_, deadline)
        if cluster:
            wait_meta_leader(cluster, deadline)
        stack_env = _stack_env(data_dir, host, port, nats_url, mongo_url)
        if cluster:
            # Every stream keeps a copy on each node (shared/nats.py ensure_streams).
            stack_env["TESSERA_EVENTS_STREAM_REPLICAS"] = str(nats_nodes)
        services = [
            Child(
                r.name,
                service_argv(r.service),
                stack_env | r.env(),
                logs / f"{r.name}.log",
                dies_with_parent=True,
            )
            for r in members
        ]
        # From the files' current ends: the terminal shows this run, not the previous ones.
        stream = LogStream([child.log_path for child in services], Console(highlight=False))
        for child in services:
            child.start()
        for member, child in zip(members, services, strict=True):
            wait_ready(f"http://{url_host(host)}:{member.port(port)}/readyz", deadline, child)
        account = asyncio.run(ensure_dev_account(data_dir, mongo_url, stack_env))
        ready: dict[str, Any] = {
            "base_url": stack_env["TESSERA_BASE_URL"],
            "site_url": stack_env["TESSERA_SITE_URL"],
            "wallet_url": stack_env["TESSERA_WALLET_URL"],
            "nats_url": nats_url,
            "mongodb_url": mongo_url,
        }
        if cluster:
            ready["nats_nodes"] = [node.describe() for node in cluster]
        # Written whole, then renamed into place: a reader polling for the file never sees it
        # half-written (a test once read it empty).
        # Private like the data dir's other files: the URLs may carry the store's password.
        written = ready_file.with_suffix(".json.tmp")
        written.touch(mode=0o600)
        written.chmod(0o600)
        written.write_text(json.dumps(ready, indent=2) + "\n")
        written.replace(ready_file)
        _banner(
            ready,
            account,
            data_dir,
            members,
            port,
            _private_webhooks(stack_env),
            admin_api=_admin_api_on(stack_env),
        )
        return _supervise(infra, services, stream if stream_logs else None)
    except Stop as stop:
        _say(f"{stop} received; stopping")
        return 0
    except (TimeoutError, RuntimeError, FileNotFoundError) as exc:
        _say(f"could not start: {exc}")
        return 1
    finally:
        for stopping in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(stopping, signal.SIG_IGN)
        # Services first, while NATS and the store still answer their final drain and writes.
        stop_all(services, timeout=6.0)
        stop_all(infra, timeout=3.0)
        ready_file.unlink(missing_ok=True)
        _say("stopped")


def _supervise(infra: list[Child], services: list[Child], stream: LogStream | None) -> int:
    restarts: dict[str, list[float]] = {child.name: [] for child in services}
    while True:
        time.sleep(0.5)
        if stream is not None:
            stream.pump()
        for child in infra:
            if not child.alive():
                _say(f"{child.name} exited unexpectedly (see {child.log_path}); stopping the stack")
                return 1
        for child in services:
            if child.alive():
                continue
            now = time.monotonic()
            recent = [t for t in restarts[child.name] if now - t < RESTART_WINDOW]
            if len(recent) >= MAX_RESTARTS:
                _say(f"{child.name} keeps exiting (see {child.log_path}); stopping the stack")
                return 1
            code = child.proc.returncode if child.proc else None
            _say(f"{child.name} exited with code {code}; restarting it (see {child.log_path})")
            restarts[child.name] = [*recent, now]
            child.start()


def _admin_api_on(env: dict[str, str]) -> bool:
    """Whether the api serves /admin: TESSERA_ADMIN_TOKEN from the environment, else from the
    .env file the services read (shared/settings.py); an empty value counts as unset there too."""
    path = env_file()
    token = env.get("TESSERA_ADMIN_TOKEN") or (
        path and dotenv_values(path).get("TESSERA_ADMIN_TOKEN")
    )
    return bool(token)


def _private_webhooks(env: dict[str, str]) -> bool:
    """What the webhooks service will read from TESSERA_WEBHOOK_ALLOW_PRIVATE_NETWORKS."""
    value = env.get("TESSERA_WEBHOOK_ALLOW_PRIVATE_NETWORKS", "")
    return value.strip().lower() in {"1", "true", "yes", "on", "y", "t"}


def _webhook_target_lines(private_allowed: bool) -> list[str]:
    if private_allowed:
        return [
            "  Webhooks may target loopback and private addresses here",
            "  (TESSERA_WEBHOOK_ALLOW_PRIVATE_NETWORKS=true; production refuses them).",
        ]
    return [
        "  Webhooks may target public addresses only",
        "  (TESSERA_WEBHOOK_ALLOW_PRIVATE_NETWORKS is off).",
    ]


def _nats_lines(ready: dict[str, Any]) -> list[str]:
    nodes = ready.get("nats_nodes")
    if not nodes:
        return [f"  NATS           {without_password(ready['nats_url'])}"]
    lines = [f"  NATS cluster   {len(nodes)} nodes, every stream with {len(nodes)} replicas"]
    lines += [f"    {n['name']:<12} {n['url']}   (monitoring {n['monitor_url']})" for n in nodes]
    return lines


def _banner(
    ready: dict[str, Any],
    account: dict[str, str],
    data_dir: Path,
    members: list[Replica],
    port: int,
    private_webhooks: bool,
    *,
    admin_api: bool = False,
) -> None:
    # The site's root has no page: pass pages live at {site_url}/p/<id> (each pass's `url`),
    # so the banner links the one page that exists without a pass, the staff scanner.
    lines = [
        "",
        "Tessera is up.",
        f"  API            {ready['base_url']}   (docs: {ready['base_url']}/docs)",
        f"  Pass pages     {ready['site_url']}/p/<id>   (each pass's url)",
        f"  Scanner page   {ready['site_url']}/scan",
        f"  Wallet service {ready['wallet_url']}",
        *_nats_lines(ready),
        f"  MongoDB        {without_password(ready['mongodb_url'])}",
        f"  Data           {data_dir}",
        f"  Logs           {data_dir / 'logs'}/*.log   (JSON, one file per process)",
        (
            f"  Operator API   {ready['base_url']}/admin/v1"
            if admin_api
            else "  Operator API   off: set TESSERA_ADMIN_TOKEN"
        ),
        *_replica_lines(members, port),
        "",
        f"  Development account {account['account_id']} (plan: free)",
        f"  Test API key:  {account['test_key']}",
        "",
        "  export TESSERA_KEY=" + account["test_key"],
        *_webhook_target_lines(private_webhooks),
        "Requests and warnings follow below (--no-logs turns this off). Press Ctrl+C to stop.",
        "",
    ]
    sys.stdout.write("\n".join(lines) + "\n")
    sys.stdout.flush()


def _replica_lines(members: list[Replica], port: int) -> list[str]:
    """Which process answers where, when services run several replicas."""
    if all(member.own_port is None for member in members):
        return []
    lines = ["", "  Replicas (each shares its service's port, and has its own for /readyz)"]
    for name in SERVICES:
        own = ", ".join(f"{m.name} :{m.port(port)}" for m in members if m.service == name)
        lines.append(f"  {name:<14} :{port + PORT_OFFSETS[name]}  <- {own}")
    return lines
