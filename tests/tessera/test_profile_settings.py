"""tessera/profile_settings.py: a database's profiler settings are read from the store's table
once, not on every command, and a change of them is seen by the very next command."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from secantus.storage import Storage

from tessera.profile_settings import install


class Counted(Storage):  # type: ignore[misc]  # SecantusDB is untyped
    reads = 0

    def get_profile(self, db: str) -> dict[str, Any]:
        Counted.reads += 1
        settings: dict[str, Any] = super().get_profile(db)
        return settings


class Patched(Counted):
    """Patched apart from SecantusDB's own class, which the test process leaves as shipped."""


@pytest.fixture(scope="module", autouse=True)
def patched() -> None:
    assert install(Patched), "the installed SecantusDB is not the one patched"


@pytest.fixture
def storage(tmp_path: Path) -> Iterator[Storage]:
    store = Patched(str(tmp_path / "data"), enable_oplog=False)
    try:
        yield store
    finally:
        store.close()


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
