"""secantusd-py's index definitions read once per write transaction instead of once per use.

SecantusDB 0.7.0b3 reads a collection's index definitions from its WiredTiger table, decoding
each one, every time a write needs them: the indexes to maintain, their partial filters, which
are multikey, and per document written its unique-key and geo checks each read them all again.
A replace of one pass (ten indexes) read them seven times, and in a rollout those reads were
about a sixth of the store's busy time (py-spy, `Storage._iter_indexes`; docs/performance.md).

Within one write's WiredTiger transaction those reads cannot change: the transaction reads one
snapshot, and a change to a collection's indexes by another connection is either in it or not.
Only the transaction's own thread can change what it reads, by marking an index multikey or
running a schema change. So each write transaction (SecantusDB's `_batch_transaction`, one per
write statement) keeps what it read, per collection, until it ends; a multikey mark that added
an index drops what was kept, and schema changes (index and collection DDL) read afresh as
shipped. Reads outside a write transaction are not changed. If the installed SecantusDB does
not have what this relies on, nothing is changed and `install` says so.
"""

import contextlib
import functools
import threading
from collections.abc import Callable, Iterator
from typing import Any

IndexRows = list[tuple[str, dict[str, Any], dict[str, Any]]]
SCHEMA_CHANGES = (
    "create_index",
    "drop_index",
    "drop_all_indexes",
    "set_index_expiry",
    "set_index_options",
    "drop_collection",
    "drop_database",
    "rename_collection",
    "import_oplog_segment",
    "_recover_pending_drops_locked",
)


class _Kept(threading.local):
    def __init__(self) -> None:
        self.depth = 0  # nested write transactions of this thread
        self.schema_changes = 0  # schema changes this thread is running
        self.rows: dict[tuple[str, str], IndexRows] = {}


def install(storage: Any = None) -> bool:
    """Patch SecantusDB's Storage, or `storage` (a subclass of it), as the module's docstring
    says; False (and nothing changed) if its internals are not those of the version this was
    written for."""
    if storage is None:
        try:
            from secantus import storage as module
        except ImportError:
            return False
        storage = module.Storage
    names = ("_iter_indexes", "_batch_transaction", "_maybe_mark_multikey", *SCHEMA_CHANGES)
    if not all(callable(getattr(storage, name, None)) for name in names):
        return False
    kept = _Kept()
    storage._iter_indexes = _kept_in_transaction(storage._iter_indexes, kept)
    storage._batch_transaction = _keeping(storage._batch_transaction, kept)
    storage._maybe_mark_multikey = _dropping_on_mark(storage._maybe_mark_multikey, kept)
    for name in SCHEMA_CHANGES:
        setattr(storage, name, _reading_afresh(getattr(storage, name), kept))
    return True


def _kept_in_transaction(iter_indexes: Callable[..., Any], kept: _Kept) -> Callable[..., Any]:
    @functools.wraps(iter_indexes)
    def _iter_indexes(self: Any, db: str, coll: str) -> Any:
        if kept.depth == 0 or kept.schema_changes:
            return iter_indexes(self, db, coll)
        rows = kept.rows.get((db, coll))
        if rows is None:
            rows = kept.rows[db, coll] = list(iter_indexes(self, db, coll))
        return iter(rows)

    return _iter_indexes


def _keeping(batch_transaction: Callable[..., Any], kept: _Kept) -> Callable[..., Any]:
    @functools.wraps(batch_transaction)
    @contextlib.contextmanager
    def _batch_transaction(self: Any, *args: Any, **kwargs: Any) -> Iterator[Any]:
        kept.depth += 1
        try:
            with batch_transaction(self, *args, **kwargs) as session:
                yield session
        finally:
            kept.depth -= 1
            if kept.depth == 0:
                kept.rows.clear()

    return _batch_transaction


def _dropping_on_mark(mark: Callable[..., Any], kept: _Kept) -> Callable[..., Any]:
    @functools.wraps(mark)
    def _maybe_mark_multikey(
        self: Any, db: str, coll: str, doc: Any, indexes: Any, already: set[str]
    ) -> set[str]:
        known = len(already)
        marked: set[str] = mark(self, db, coll, doc, indexes, already)
        if len(marked) != known:  # an index marked now (or found marked): read them afresh
            kept.rows.pop((db, coll), None)
        return marked

    return _maybe_mark_multikey


def _reading_afresh(change: Callable[..., Any], kept: _Kept) -> Callable[..., Any]:
    @functools.wraps(change)
    def schema_change(self: Any, *args: Any, **kwargs: Any) -> Any:
        kept.schema_changes += 1
        kept.rows.clear()
        try:
            return change(self, *args, **kwargs)
        finally:
            kept.schema_changes -= 1
            kept.rows.clear()

    return schema_change
