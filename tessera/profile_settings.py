"""secantusd-py's profiler settings kept in memory instead of read from its table per command.

SecantusDB 0.7.0b3 reads a database's profiler settings (level, slowms, sampleRate) on every
command it runs, from a WiredTiger table under the store-wide lock, and decodes them: about
4 % of the store's busy time in a rollout (py-spy, `Storage.get_profile`; docs/performance.md),
and one more pass through the lock that every command takes. Only `set_profile` (the `profile`
command) writes them, so each store keeps what it read per database and forgets it when
`set_profile` runs; a read that overlapped a `set_profile` is not kept. If the installed
SecantusDB does not have what this relies on, nothing is changed and `install` says so.
"""

import functools
import threading
from collections.abc import Callable
from typing import Any

KEPT = "_tessera_profiles"


class _Kept:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.generation = 0  # moves on every set_profile
        self.settings: dict[str, dict[str, Any]] = {}


def install(storage: Any = None) -> bool:
    """Patch SecantusDB's Storage, or `storage` (a subclass of it), as the module's docstring
    says; False (and nothing changed) if it has not what this relies on."""
    if storage is None:
        try:
            from secantus import storage as module
        except ImportError:
            return False
        storage = module.Storage
    if not all(callable(getattr(storage, name, None)) for name in ("get_profile", "set_profile")):
        return False
    storage.get_profile = _kept(storage.get_profile)
    storage.set_profile = _forgetting(storage.set_profile)
    return True


def _kept_of(store: Any) -> _Kept:
    kept: _Kept | None = store.__dict__.get(KEPT)
    if kept is None:
        kept = store.__dict__.setdefault(KEPT, _Kept())
    return kept


def _kept(get_profile: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
    @functools.wraps(get_profile)
    def kept_profile(self: Any, db: str) -> dict[str, Any]:
        kept = _kept_of(self)
        settings = kept.settings.get(db)
        if settings is None:
            generation = kept.generation
            settings = get_profile(self, db)
            with kept.lock:
                if kept.generation == generation:
                    kept.settings[db] = settings
        return dict(settings)

    return kept_profile


def _forgetting(set_profile: Callable[..., None]) -> Callable[..., None]:
    @functools.wraps(set_profile)
    def forgetting_profile(self: Any, db: str, **settings: Any) -> None:
        kept = _kept_of(self)
        try:
            set_profile(self, db, **settings)
        finally:
            with kept.lock:
                kept.generation += 1
                kept.settings.clear()

    return forgetting_profile
