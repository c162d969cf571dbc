"""In-process SecantusDB stores for the tests of tessera's patches of it: a subclass patched
apart from SecantusDB's own class, which the test process leaves as shipped."""

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from secantus.storage import Storage


@contextmanager
def patched_storage(
    cls: type[Storage], install: Callable[[Any], bool], tmp_path: Path
) -> Iterator[Storage]:
    """A store of `cls` in `tmp_path`, once `install` patched `cls` (once per class)."""
    if not getattr(cls, "_tessera_patched", False):
        assert install(cls), "the installed SecantusDB is not the one patched"
        cls._tessera_patched = True
    store = cls(str(tmp_path / "data"), enable_oplog=False)
    try:
        yield store
    finally:
        store.close()
