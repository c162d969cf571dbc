"""The data directory's lock, in one process: flock conflicts between open file descriptions,
so a second lock_data_dir here stands for a second `tessera up` (tests/tessera/test_launcher.py
runs the real two)."""

import os
from pathlib import Path

import pytest

from tessera.datalock import LOCK_FILE, DataDirBusy, lock_data_dir


def test_a_second_lock_names_the_holder_and_leaves_its_pid(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    held = lock_data_dir(data_dir, Path(".tessera"))
    try:
        with pytest.raises(DataDirBusy) as busy:
            lock_data_dir(data_dir, Path(".tessera"))
        assert str(busy.value) == (
            f"a Tessera stack (pid {os.getpid()}) already runs on .tessera; "
            "stop it or use --data-dir"
        )
        assert (data_dir / LOCK_FILE).read_text() == f"{os.getpid()}\n"
    finally:
        os.close(held)
    # Released with its descriptor (or its process): the next start takes it.
    os.close(lock_data_dir(data_dir))
