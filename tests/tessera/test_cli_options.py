"""`tessera --version` and the help of `tessera up`: what a new user reads first."""

import argparse
from importlib.metadata import version

import pytest

from tessera.cli import build_parser, main


def test_version_comes_from_the_package_metadata(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == f"tessera {version('tessera')}"


def _subcommand(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found: argparse.ArgumentParser = action.choices[name]
            return found
    raise AssertionError("no subcommands")


def test_every_up_option_has_help_text(capsys: pytest.CaptureFixture[str]) -> None:
    up = _subcommand(build_parser(), "up")
    options = [action for action in up._actions if action.option_strings]
    assert {"--data-dir", "--host", "--port", "--replicas"} <= {
        name for action in options for name in action.option_strings
    }
    for action in options:
        assert action.help, action.option_strings
        assert action.help != argparse.SUPPRESS, action.option_strings
    with pytest.raises(SystemExit):
        main(["up", "--help"])
    assert "(default: .tessera)" in capsys.readouterr().out
