"""Port blocks for a stack are drawn where outgoing connections never take a port; the stack's
environment is the dotenv file under the process's; URLs name the bound host as clients reach
it."""

from pathlib import Path

import pytest

from tessera.launcher import url_host, without_password
from tessera.processes import BLOCK_LOW, base_env, ephemeral_low, free_port_block, port_free


def test_a_port_block_is_free_and_below_the_ephemeral_range() -> None:
    for _ in range(20):
        first = free_port_block(12)
        assert first >= BLOCK_LOW
        assert first + 12 <= ephemeral_low()
        assert all(port_free(first + i) for i in range(12))


def test_the_stack_environment_is_the_dotenv_file_under_the_process_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the services read from .env, `tessera up` and `tessera accounts create` read too
    (the database the development account is made in, say); the process environment wins, and
    an empty value counts as unset, as in the services' settings."""
    dotenv = tmp_path / ".env"
    dotenv.write_text(
        "TESSERA_MONGODB_DATABASE=dev\nTESSERA_SITE_URL=https://tunnel.example\nTESSERA_X=\n"
    )
    monkeypatch.setenv("TESSERA_ENV_FILE", str(dotenv))
    monkeypatch.setenv("TESSERA_SITE_URL", "https://mine.example")
    monkeypatch.delenv("TESSERA_MONGODB_DATABASE", raising=False)
    monkeypatch.delenv("TESSERA_X", raising=False)
    env = base_env()
    assert env["TESSERA_MONGODB_DATABASE"] == "dev"
    assert env["TESSERA_SITE_URL"] == "https://mine.example"
    assert "TESSERA_X" not in env


def test_urls_name_the_bound_host_as_a_client_reaches_it() -> None:
    assert url_host("127.0.0.1") == "127.0.0.1"
    assert url_host("0.0.0.0") == "127.0.0.1"
    assert url_host("::1") == "[::1]"


def test_the_banner_shows_server_urls_without_their_password() -> None:
    assert without_password("mongodb://app:s3cret@db:27017/?tls=true") == (
        "mongodb://app:***@db:27017/?tls=true"
    )
    assert without_password("nats://a:b@n1:4222,nats://n2:4222") == (
        "nats://a:***@n1:4222,nats://n2:4222"
    )
    assert without_password("mongodb://127.0.0.1:27017") == "mongodb://127.0.0.1:27017"
