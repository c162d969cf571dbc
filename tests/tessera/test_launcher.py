"""`tessera up`: the whole stack from one command, as a new user runs it."""

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx2
import pytest

from tessera.launcher import _admin_api_on, _banner, _private_webhooks
from tessera.processes import PORT_OFFSETS, SERVICES, free_port_block, ports_needed, replicas_of
from tests.support.api import TEMPLATE_BODY
from tests.support.polling import poll

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
READY_KEYS = {"base_url", "site_url", "wallet_url", "nats_url", "mongodb_url"}


def _start(data_dir: Path, port: int, log: Path, *extra: str) -> subprocess.Popen[bytes]:
    # TESSERA_ENV_FILE stays: the suite's "no .env" (tests/conftest.py).
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("TESSERA_") or k == "TESSERA_ENV_FILE"
    }
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "tessera.cli", "up", "--data-dir", str(data_dir),
             "--port", str(port), *extra],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )  # fmt: skip


def _wait_ready(data_dir: Path, proc: subprocess.Popen[bytes]) -> dict[str, str]:
    ready = data_dir / "ready.json"
    poll(lambda: ready.exists() or proc.poll() is not None, bool, timeout=90)
    assert proc.poll() is None, "tessera up exited during start"
    loaded: dict[str, str] = json.loads(ready.read_text())
    return loaded


# Past the launcher's own grace periods (6 s for the services, then 3 s for NATS and the
# store, each followed by SIGKILL): a launcher still running then is stuck.
STOP_DEADLINE_SECONDS = 15


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=STOP_DEADLINE_SECONDS)


def _stops_cleanly(proc: subprocess.Popen[bytes], data_dir: Path, replicas: int = 1) -> None:
    """SIGTERM stops the launcher, which exits 0 once every service process has ended on its
    own: each wrote uvicorn's last line, which a process the launcher had to SIGKILL after its
    grace period never writes (a service's log is appended to by each of its processes)."""
    _stop(proc)
    assert proc.returncode == 0
    for name in SERVICES:
        for member in replicas_of(name, replicas, 0):
            text = (data_dir / "logs" / f"{member.name}.log").read_text()
            last_process = text.rsplit("Started server process", 1)[-1]
            assert "Finished server process" in last_process, (member.name, text[-2000:])


def _pid_of(service: str, port: int, variable: str = "") -> int:
    """The pid of `python -m services.<service>` listening on `port` (Linux /proc): the one
    whose TESSERA_<SERVICE>_PORT is `port`, or whose `variable` (TESSERA_REPLICA_PORT) is."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        wanted = f"{variable or f'TESSERA_{service.upper()}_PORT'}={port}".encode()
        if f"services.{service}".encode() in cmdline and wanted in environ.split(b"\0"):
            return int(entry.name)
    raise AssertionError(f"no {service} process on port {port}")


def _ready(port: int) -> bool:
    try:
        return httpx2.get(f"http://127.0.0.1:{port}/readyz").status_code == 200
    except httpx2.HTTPError:
        return False


def _second_start_is_refused(data_dir: Path, port: int, log: Path) -> None:
    """A second `tessera up` on the data dir of a running stack fails at once, touching nothing:
    the first stack's ready.json and processes stay as they were (issue 16, acceptance 1)."""
    ready = data_dir / "ready.json"
    before = (ready.read_bytes(), ready.stat().st_mtime_ns)
    api_pid = _pid_of("api", port)
    second = _start(data_dir, free_port_block(len(PORT_OFFSETS)), log)
    try:
        # A deadline, not a measure: on a loaded machine importing the CLI alone takes seconds.
        second.wait(timeout=60)
    finally:
        if second.poll() is None:
            second.kill()
    out = log.read_text()
    assert second.returncode == 1, out
    assert re.search(
        rf"a Tessera stack \(pid \d+\) already runs on {re.escape(str(data_dir))}; "
        "stop it or use --data-dir",
        out,
    ), out
    assert "could not start" not in out
    assert (ready.read_bytes(), ready.stat().st_mtime_ns) == before
    assert _pid_of("api", port) == api_pid
    assert _ready(port)


def _banner_links_answer(banner: str, ready: dict[str, str], data_dir: Path) -> None:
    """The banner's page link is a page, and it says where the logs are and why /admin 404s."""
    scanner = re.search(r"Scanner page\s+(\S+)", banner)
    assert scanner is not None, banner
    page = httpx2.get(scanner.group(1))
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert f"{ready['site_url']}/p/<id>" in banner
    assert f"{data_dir.resolve() / 'logs'}/*.log" in banner
    assert "Operator API   off: set TESSERA_ADMIN_TOKEN" in banner
    admin = httpx2.get(f"{ready['base_url']}/admin/v1/accounts")
    assert admin.status_code == 404
    assert "set TESSERA_ADMIN_TOKEN" in admin.json()["error"]["message"]


def test_up_runs_restarts_stops_and_keeps_data(tmp_path: Path) -> None:
    data_dir, log = tmp_path / "data", tmp_path / "up.log"
    port = free_port_block(len(PORT_OFFSETS))
    proc = _start(data_dir, port, log)
    try:
        ready = _wait_ready(data_dir, proc)
        assert set(ready) == READY_KEYS
        assert ready["base_url"] == f"http://127.0.0.1:{port}"
        assert ready["wallet_url"] == f"http://127.0.0.1:{port + PORT_OFFSETS['events']}"
        # The banner is printed just after ready.json is written: polled for, not raced.
        key = poll(
            lambda: re.search(r"Test API key:\s+(svc_test_\S+)", log.read_text()),
            timeout=30,
            message="the banner's test key in the log",
        )
        _second_start_is_refused(data_dir, port, tmp_path / "second.log")
        _banner_links_answer(log.read_text(), ready, data_dir)
        headers = {"Authorization": f"Bearer {key.group(1)}"}
        with httpx2.Client(base_url=ready["base_url"], headers=headers, timeout=30) as client:
            created = client.post("/v1/templates", json=TEMPLATE_BODY)
            assert created.status_code == 200, created.text
            # The terminal shows a readable line per request; the file keeps the JSON.
            poll(lambda: re.search(r" api +POST /v1/templates -> 200 ", log.read_text()), bool)
            assert '"msg": "POST /v1/templates -> 200' in (data_dir / "logs/api.log").read_text()

            # A service that dies is restarted by the launcher, and says so.
            issuer_port = port + PORT_OFFSETS["issuer"]
            os.kill(_pid_of("issuer", issuer_port), signal.SIGKILL)
            poll(lambda: "issuer exited" in log.read_text(), bool)
            poll(
                lambda: client.post("/v1/passes", json={"template_id": created.json()["id"]}),
                lambda response: response.status_code == 200,
                timeout=60,
            )
        _stops_cleanly(proc, data_dir)
        assert not (data_dir / "ready.json").exists()
        with pytest.raises(httpx2.ConnectError):
            httpx2.get(f"{ready['base_url']}/healthz")

        # A second start on the same data dir keeps the account, its key and its data.
        proc = _start(data_dir, port, log)
        ready = _wait_ready(data_dir, proc)
        with httpx2.Client(base_url=ready["base_url"], headers=headers, timeout=30) as client:
            fetched = client.get(f"/v1/templates/{created.json()['id']}")
            assert fetched.status_code == 200
    finally:
        if proc.poll() is None:
            _stop(proc)


def test_up_with_two_replicas_runs_eight_processes_and_restarts_each(tmp_path: Path) -> None:
    data_dir, log = tmp_path / "data", tmp_path / "up.log"
    port = free_port_block(ports_needed(2))
    proc = _start(data_dir, port, log, "--replicas", "2")
    try:
        ready = _wait_ready(data_dir, proc)
        members = [member for name in SERVICES for member in replicas_of(name, 2, port)]
        assert len({member.port(port) for member in members}) == 8
        banner = log.read_text()
        for member in members:
            assert f"{member.name} :{member.port(port)}" in banner, banner
            readyz = httpx2.get(f"http://127.0.0.1:{member.port(port)}/readyz")
            assert readyz.status_code == 200, member.name
        key = re.search(r"Test API key:\s+(svc_test_\S+)", banner)
        assert key is not None, banner
        headers = {"Authorization": f"Bearer {key.group(1)}"}
        with httpx2.Client(base_url=ready["base_url"], headers=headers, timeout=30) as client:
            template = client.post("/v1/templates", json=TEMPLATE_BODY)
            assert template.status_code == 200, template.text
            issued = client.post("/v1/passes", json={"template_id": template.json()["id"]})
            assert issued.status_code == 200, issued.text

            # One replica dies: the launcher restarts that one, and the other keeps serving.
            second = next(m for m in members if m.name == "issuer-2")
            os.kill(_pid_of("issuer", second.port(port), "TESSERA_REPLICA_PORT"), signal.SIGKILL)
            poll(lambda: "issuer-2 exited" in log.read_text(), bool)
            assert "issuer exited" not in log.read_text()
            poll(lambda: _ready(second.port(port)), bool, timeout=60)
            issued = client.post("/v1/passes", json={"template_id": template.json()["id"]})
            assert issued.status_code == 200, issued.text
        _stops_cleanly(proc, data_dir, replicas=2)
    finally:
        if proc.poll() is None:
            _stop(proc)


@pytest.mark.parametrize(
    ("value", "claim"),
    [
        ("true", "loopback and private addresses"),
        ("1", "loopback and private addresses"),
        ("false", "public addresses only"),
        ("0", "public addresses only"),
        (None, "public addresses only"),
    ],
)
def test_the_banner_tells_the_webhook_target_rule_in_force(
    value: str | None, claim: str, capsys: pytest.CaptureFixture[str]
) -> None:
    env = {} if value is None else {"TESSERA_WEBHOOK_ALLOW_PRIVATE_NETWORKS": value}
    ready = dict.fromkeys(("base_url", "site_url", "wallet_url", "nats_url", "mongodb_url"), "x")
    account = {"account_id": "acct_x", "test_key": "svc_test_x"}
    _banner(ready, account, Path("/tmp/x"), [], 8000, _private_webhooks(env))
    assert claim in capsys.readouterr().out


def test_the_banner_reads_the_admin_token_where_the_api_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TESSERA_ENV_FILE", raising=False)
    assert not _admin_api_on({})
    (tmp_path / ".env").write_text("TESSERA_ADMIN_TOKEN=\n")
    assert not _admin_api_on({})
    (tmp_path / ".env").write_text("TESSERA_ADMIN_TOKEN=" + "t" * 40 + "\n")
    assert _admin_api_on({})
    monkeypatch.setenv("TESSERA_ENV_FILE", "")
    assert not _admin_api_on({})
    assert _admin_api_on({"TESSERA_ADMIN_TOKEN": "t" * 40})


def _stack_pids(data_dir: Path) -> list[int]:
    """Processes of the stack started on `data_dir`: NATS and the store name it in their
    arguments, the services in their environment (TESSERA_DATA_DIR or a path under it)."""
    found = []
    marker = str(data_dir).encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if (
            state != "Z"
            and b"tessera.cli" not in cmdline
            and (marker in cmdline or marker in environ)
        ):
            found.append(int(entry.name))
    return found


@pytest.mark.parametrize("death", [signal.SIGKILL, signal.SIGHUP])
def test_the_stack_goes_with_its_launcher_however_it_dies(
    tmp_path: Path, death: signal.Signals
) -> None:
    """Each child runs in a session of its own: a launcher killed (SIGKILL, the OOM killer) or
    whose terminal closed (SIGHUP) left NATS, the store and the services running, holding their
    ports and data directory beside the next `tessera up`. They go with it now."""
    data_dir, log = tmp_path / "data", tmp_path / "up.log"
    proc = _start(data_dir, free_port_block(len(PORT_OFFSETS)), log)
    try:
        _wait_ready(data_dir, proc)
        assert len(_stack_pids(data_dir)) >= 6  # NATS, the store, four services
        proc.send_signal(death)
        proc.wait(timeout=STOP_DEADLINE_SECONDS)
        poll(lambda: _stack_pids(data_dir), lambda pids: not pids, timeout=30, message="gone")
    finally:
        if proc.poll() is None:
            proc.kill()
        for pid in _stack_pids(data_dir):  # orphans of a failed run: not left to the machine
            os.kill(pid, signal.SIGKILL)
