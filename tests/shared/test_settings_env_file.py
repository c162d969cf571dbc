"""`.env` in the working directory configures every service; the environment wins over it."""

import os
from pathlib import Path

import pytest

from services.api.config import ApiSettings
from services.issuer.config import IssuerSettings
from shared.settings import ENV_FILE

DOTENV = """\
# Comments and blank lines are allowed.
TESSERA_LOG_LEVEL=DEBUG
TESSERA_MONGODB_DATABASE=from_dotenv
TESSERA_API_MAX_BODY_BYTES=2048
TESSERA_ISSUER_OUTBOX_POLL_SECONDS=7
TESSERA_ADMIN_TOKEN=
"""


@pytest.fixture
def in_dir_with_dotenv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in list(os.environ):
        if name.startswith("TESSERA_"):
            monkeypatch.delenv(name)
    (tmp_path / ENV_FILE).write_text(DOTENV)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.usefixtures("in_dir_with_dotenv")
def test_services_read_common_and_own_variables_from_dotenv() -> None:
    api = ApiSettings()
    assert api.log_level == "DEBUG"
    assert api.mongodb_database == "from_dotenv"
    assert api.max_body_bytes == 2048
    # An empty value is as good as absent, as in the environment: the operator API stays off.
    assert api.admin_token is None
    issuer = IssuerSettings()
    assert issuer.log_level == "DEBUG"
    assert issuer.outbox_poll_seconds == 7


@pytest.mark.usefixtures("in_dir_with_dotenv")
def test_the_environment_wins_over_dotenv(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TESSERA_MONGODB_DATABASE", "from_env")
    monkeypatch.setenv("TESSERA_API_MAX_BODY_BYTES", "4096")
    api = ApiSettings()
    assert api.mongodb_database == "from_env"
    assert api.max_body_bytes == 4096
    assert api.log_level == "DEBUG"


def test_without_dotenv_the_defaults_hold(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("TESSERA_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    assert ApiSettings().mongodb_database == "tessera"


def test_tessera_env_file_names_another_file_or_none(
    in_dir_with_dotenv: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = in_dir_with_dotenv / "other.env"
    other.write_text("TESSERA_MONGODB_DATABASE=from_other\n")
    monkeypatch.setenv("TESSERA_ENV_FILE", str(other))
    assert ApiSettings().mongodb_database == "from_other"
    monkeypatch.setenv("TESSERA_ENV_FILE", "")
    assert ApiSettings().mongodb_database == "tessera"
