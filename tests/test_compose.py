"""docker-compose.yml, .env.example and the Dockerfile agree with the services' settings classes."""

import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import AliasChoices

from services.api.config import ApiSettings
from services.events.config import EventsSettings
from services.issuer.config import IssuerSettings
from services.webhooks.config import WebhooksSettings
from shared.settings import AppleIdentitySettings, ServiceSettings

ROOT = Path(__file__).resolve().parent.parent
SETTINGS: dict[str, type[ServiceSettings]] = {
    "api": ApiSettings,
    "events": EventsSettings,
    "issuer": IssuerSettings,
    "webhooks": WebhooksSettings,
}
PUBLISHED = {"api", "events"}
DUMMY_SECRET = "x" * 40


def _compose() -> dict[str, Any]:
    data = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert isinstance(data, dict)
    services = data["services"]
    assert isinstance(services, dict)
    return services


def _env_example() -> dict[str, str]:
    values: dict[str, str] = {}
    for line in (ROOT / ".env.example").read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, sep, value = line.partition("=")
            assert sep, f"not KEY=value: {line!r}"
            values[key.strip()] = value.strip()
    return values


def _service_env(name: str) -> dict[str, str]:
    return {key: str(value) for key, value in _compose()[name]["environment"].items()}


def accepted_names(cls: type[ServiceSettings]) -> set[str]:
    """The environment variables `cls` reads (upper-cased; pydantic-settings ignores case)."""
    prefix = cls.model_config.get("env_prefix", "")
    names: set[str] = set()
    for field_name, field in cls.model_fields.items():
        alias = field.validation_alias
        if isinstance(alias, AliasChoices):
            names.update(choice for choice in alias.choices if isinstance(choice, str))
        elif isinstance(alias, str):
            names.add(alias)
        else:
            names.add(prefix + field_name)
    return {name.upper() for name in names}


@pytest.mark.parametrize("name", SETTINGS)
def test_service_container(name: str) -> None:
    service = _compose()[name]
    assert service["command"] == ["python", "-m", f"services.{name}"]
    assert service["build"] == "."
    assert service["image"] == "tessera:latest"
    unknown = {key.upper() for key in _service_env(name)} - accepted_names(SETTINGS[name])
    assert not unknown, f"{name} does not read {sorted(unknown)}"
    port = _service_env(name)[f"TESSERA_{name.upper()}_PORT"]
    health = " ".join(service["healthcheck"]["test"])
    assert re.findall(r"http://127\.0\.0\.1:(\d+)/readyz", health) == [port]
    published = [str(mapping) for mapping in service.get("ports", [])]
    assert published == ([f"{port}:{port}"] if name in PUBLISHED else [])
    depends = service["depends_on"]
    assert {dep: depends[dep]["condition"] for dep in depends} == {
        "nats": "service_healthy",
        "mongo": "service_healthy",
    }


def test_env_example_names_real_settings() -> None:
    known = set().union(*(accepted_names(cls) for cls in SETTINGS.values()))
    unknown = {key.upper() for key in _env_example()} - known
    assert not unknown, f"no service reads {sorted(unknown)}"


@pytest.mark.parametrize("name", SETTINGS)
def test_settings_load_in_production(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _without_tessera_variables(monkeypatch)
    env = {**_env_example(), **_service_env(name)}
    for key, value in env.items():
        if key.startswith("TESSERA_APPLE_") and key.endswith("_PATH"):
            stand_in = tmp_path / Path(value).name
            stand_in.write_text("-----BEGIN CERTIFICATE-----\n")
            value = str(stand_in)
        monkeypatch.setenv(key, value or DUMMY_SECRET)
    settings = SETTINGS[name]()
    assert settings.environment == "production"
    assert settings.host == "0.0.0.0"
    assert str(settings.model_dump()["port"]) == env[f"TESSERA_{name.upper()}_PORT"]


@pytest.mark.parametrize("name", ["issuer", "events"])
def test_apple_secrets_come_from_the_read_only_mount(name: str) -> None:
    """The issuer signs with the Apple identity, the events service authenticates to APNs."""
    assert "./secrets:/run/secrets/tessera:ro" in _compose()[name]["volumes"]
    paths = {
        k: v for k, v in {**_env_example(), **_service_env(name)}.items() if k.endswith("_PATH")
    }
    assert sorted(paths) == [
        "TESSERA_APPLE_CERTIFICATE_PATH",
        "TESSERA_APPLE_PRIVATE_KEY_PATH",
        "TESSERA_APPLE_WWDR_CERTIFICATE_PATH",
    ]
    assert all(path.startswith("/run/secrets/tessera/") for path in paths.values())


def _without_tessera_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only what a test sets, and no dotenv file (a developer's .env changes no test)."""
    for key in os.environ:
        if key.upper().startswith("TESSERA_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("TESSERA_ENV_FILE", "")


@pytest.mark.parametrize("name", ["issuer", "events"])
def test_a_pkcs12_identity_in_env_is_not_overridden_by_compose(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """.env.example offers a PKCS#12 file instead of the two PEM files. docker-compose.yml's
    `environment:` wins over `.env`, so it must not set the PEM paths itself: with them and
    TESSERA_APPLE_PKCS12_PATH the issuer and the events service refused to start."""
    _without_tessera_variables(monkeypatch)
    env = _env_example()
    del env["TESSERA_APPLE_CERTIFICATE_PATH"], env["TESSERA_APPLE_PRIVATE_KEY_PATH"]
    env["TESSERA_APPLE_PKCS12_PATH"] = "/run/secrets/tessera/pass.p12"
    for key, value in {**env, **_service_env(name)}.items():
        monkeypatch.setenv(key, value or DUMMY_SECRET)
    settings = SETTINGS[name]()
    assert isinstance(settings, AppleIdentitySettings)
    assert settings.apple_pkcs12_path == Path("/run/secrets/tessera/pass.p12")
    assert settings.apple_certificate_path is None
    assert settings.apple_private_key_path is None


def _seconds(duration: str) -> float:
    """A Compose duration such as "30s", "1m30s" or "2m"."""
    parts = re.fullmatch(r"(?=\d)(?:(\d+)m)?(?:(\d+)s)?", duration)
    assert parts, f"not a duration of minutes and seconds: {duration!r}"
    minutes, seconds = parts.groups()
    return int(minutes or 0) * 60 + int(seconds or 0)


@pytest.mark.parametrize("name", SETTINGS)
def test_a_stopping_service_gets_the_time_its_shutdown_takes(name: str) -> None:
    """Docker sends SIGKILL 10 s after SIGTERM unless told otherwise; a service's shutdown lets
    work in flight finish (webhook attempts up to the request timeout, 10 s, then the workers
    with up to 10 s each; docs/operations.md#stopping), which takes longer than that."""
    grace = _compose()[name].get("stop_grace_period")
    assert grace is not None, f"{name} is killed 10 s after SIGTERM"
    assert _seconds(str(grace)) >= 30


def test_backing_services() -> None:
    services = _compose()
    assert "-js" in services["nats"]["command"]
    replica_set = services["mongo"]["command"][services["mongo"]["command"].index("--replSet") + 1]
    for name in SETTINGS:
        assert f"replicaSet={replica_set}" in _service_env(name)["TESSERA_MONGODB_URL"]


def test_scale_out_example() -> None:
    """Background services run replicated; a replicated service cannot publish a fixed port."""
    services = _compose()
    for name in ("issuer", "webhooks"):
        assert services[name]["deploy"]["replicas"] >= 2
    for name, service in services.items():
        if service.get("deploy", {}).get("replicas", 1) > 1:
            assert not service.get("ports"), f"{name} publishes a port but runs replicated"


def _cluster() -> dict[str, Any]:
    data = yaml.safe_load((ROOT / "docker-compose.cluster.yml").read_text())
    assert isinstance(data, dict)
    return data


def _option(command: list[str], flag: str) -> str:
    return command[command.index(flag) + 1]


def test_the_cluster_file_runs_three_routed_nodes_and_every_service_uses_all_of_them() -> None:
    """docker-compose.cluster.yml (issue 17): three JetStream nodes, each with its own name,
    volume and the routes of all three; every service lists the three client URLs, makes its
    streams with three replicas, waits for every node, and its settings accept both."""
    cluster = _cluster()
    services = cluster["services"]
    nodes = [name for name, service in services.items() if "nats" in service.get("image", "")]
    assert nodes == ["nats", "nats-2", "nats-3"]
    assert nodes[0] in _compose()  # node 1 replaces the base file's single server
    routes = {f"nats://{node}:6222" for node in nodes}
    names, volumes = set(), set()
    for node in nodes:
        command = services[node]["command"]
        assert "-js" in command
        assert _option(command, "--cluster_name") == "tessera"
        assert set(_option(command, "--routes").split(",")) == routes
        names.add(_option(command, "-n"))
        volumes.add(services[node]["volumes"][0].split(":")[0])
    assert len(names) == len(volumes) == 3
    assert volumes - {"nats-data"} <= set(cluster["volumes"])
    for name, cls in SETTINGS.items():
        env = services[name]["environment"]
        urls = env["TESSERA_NATS_URL"].split(",")
        assert urls == [f"nats://{node}:4222" for node in nodes]
        assert int(env["TESSERA_EVENTS_STREAM_REPLICAS"]) == len(nodes)
        assert set(services[name]["depends_on"]) >= set(nodes)
        assert set(env) <= accepted_names(cls), name


def test_image_runs_as_non_root() -> None:
    users = re.findall(r"^USER\s+(\S+)", (ROOT / "Dockerfile").read_text(), re.MULTILINE)
    assert users, "the Dockerfile never switches away from root"
    assert users[-1].split(":")[0] not in {"root", "0"}
