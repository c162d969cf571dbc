"""The lock files pin what pyproject.toml asks for: a dependency added without `make lock` fails
here, offline, rather than as an ImportError on a fresh install."""

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^ ;\\]+)")


def _pins(lock: str) -> dict[str, str]:
    """name -> version of every `name==version` line; each must carry hashes."""
    text = (ROOT / lock).read_text()
    pins: dict[str, str] = {}
    for block in re.split(r"\n(?=[A-Za-z0-9])", text):
        match = _PIN.match(block)
        if match is None:
            continue
        assert "--hash=sha256:" in block, f"{lock}: {match[1]} has no hash"
        pins[canonicalize_name(match[1])] = match[2]
    return pins


def _requirements(*extras: str) -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = list(project["dependencies"])
    for extra in extras:
        names += project["optional-dependencies"][extra]
    return [Requirement(name) for name in names]


@pytest.mark.parametrize(
    ("lock", "extras"),
    [
        ("requirements.txt", ()),
        ("requirements-run.txt", ("embedded",)),
        ("requirements-dev.txt", ("embedded", "dev")),
    ],
)
def test_every_dependency_is_pinned_within_its_range(lock: str, extras: tuple[str, ...]) -> None:
    pins = _pins(lock)
    for requirement in _requirements(*extras):
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{name} is not in {lock}: run `make lock`"
        assert requirement.specifier.contains(pins[name], prereleases=True), (
            f"{lock} pins {name}=={pins[name]}, outside {requirement.specifier}: run `make lock`"
        )


@pytest.mark.parametrize("lock", ["requirements.txt", "requirements-run.txt"])
def test_runtime_pins_agree_with_the_dev_lock(lock: str) -> None:
    """The image and `make run` run the versions the tests ran."""
    runtime, dev = _pins(lock), _pins("requirements-dev.txt")
    assert {name: dev.get(name) for name in runtime} == runtime
