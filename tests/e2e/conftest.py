"""Fixtures the end-to-end modules share beyond tests/conftest.py."""

from collections.abc import Iterator

import pytest

from tests.support.receiver import Receiver, running_receiver


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    """A webhook receiver on loopback, one per module."""
    with running_receiver() as running:
        yield running
