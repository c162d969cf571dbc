"""tessera/profile_settings.py: a database's profiler settings are read from the store's table
once, not on every command, and a change of them is seen by the very next command."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from secantus.storage import Storage

from tessera.profile_settings import install
from tests.support.store_patches import patched_storage


class Counted(Storage):  # type: ignore[misc]  # SecantusDB is untyped
    reads = 0

    def get_profile(self, db: str) -> dict[str, Any]:
        Counted.reads += 1
        settings: dict[str, Any] = super().get_profile(db)
        return settings


class Patched(Counted):
    """Patched by the fixture, apart from SecantusDB's own class."""


@pytest.fixture
def storage(tmp_path: Path) -> Iterator[Storage]:
    with patched_storage(Patched, install, tmp_path) as store:
        yield store


def test_the_settings_are_read_once_and_a_change_is_seen_at_once(storage: Storage) -> None:
    Counted.reads = 0
    for _ in range(50):
        assert storage.get_profile("tessera")["level"] == 0
    assert Counted.reads == 1

    storage.set_profile("tessera", level=2, slowms=5)
    assert storage.get_profile("tessera") == {"level": 2, "slowms": 5, "sampleRate": 1.0}
    assert storage.get_profile("other")["level"] == 0


def test_a_caller_changing_what_it_got_changes_nothing_kept(storage: Storage) -> None:
    storage.get_profile("tessera")["level"] = 2
    assert storage.get_profile("tessera")["level"] == 0
