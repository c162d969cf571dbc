"""secantusd-py as `tessera up` and the tests run it: its retryable-write records kept in order,
its journal flushed once per reply outside its locks (tessera/journal_flush.py), its index
definitions read once per write transaction (tessera/index_metadata.py), its profiler
settings kept in memory (tessera/profile_settings.py), and its queries narrowed by the longest
index prefix their filter pins (tessera/index_prefix.py).

Run as `python -m tessera.secantusd [secantusd-py's arguments]`. SecantusDB keeps the reply of
every retryable write (a write outside a transaction, which PyMongo sends with a `txnNumber`)
for 30 minutes, at most 10,000 of them, so that a driver's retry gets the first reply instead of
applying the write twice. SecantusDB 0.7.0b3 prunes those records by scanning all of them on
every retryable write, twice, and once 10,000 are kept, by sorting all of them as well: a write
costs the store about 0.07 ms more per 1,000 writes of the last 30 minutes, and about 10 ms in
all past 10,000, against 0.6 ms with this fix (`python -m bench.store_costs [--shipped]`,
docs/performance.md). A stack that takes a few
writes a second for half an hour reaches that, and its store then serves a tenth of the writes.

The records are the same, with the same lifetime and cap, and a retry is answered as before;
they are only kept oldest first, so pruning takes them from the front and stops at the first
that stays. A record stored again under the same session and number moves to the back. If the
installed SecantusDB does not have the internals this relies on, the store runs unchanged and
says so on stderr. Production runs MongoDB, which keeps one record per session.
"""

import sys
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from secantus import transactions
from secantus.cli import main as serve

from tessera import index_metadata, index_prefix, journal_flush, profile_settings

Registry = Any  # secantus.transactions.TransactionRegistry: private internals, untyped here
RECORDS = "_retryable"


def keep_records_in_order(registry: Any = None) -> bool:
    """Patch SecantusDB's TransactionRegistry, or `registry` (a subclass of it), as the module's
    docstring says; False if its internals are not those of the version this was written for
    (then nothing is changed)."""
    registry = registry or getattr(transactions, "TransactionRegistry", None)
    needed = ("_RETRYABLE_RECORD_LIFETIME_SECONDS", "_RETRYABLE_RECORD_MAX")
    if registry is None or not all(hasattr(transactions, name) for name in needed):
        return False
    if not all(hasattr(registry, name) for name in ("_prune_retryable_locked", "record_retryable")):
        return False
    probe = registry()
    if not isinstance(getattr(probe, RECORDS, None), dict) or not callable(probe._time):
        return False
    registry.__init__ = _with_ordered_records(registry.__init__)
    registry.record_retryable = _moving_to_back(registry.record_retryable)
    registry._prune_retryable_locked = prune_oldest_first
    return True


def _with_ordered_records(init: Callable[..., None]) -> Callable[..., None]:
    def __init__(self: Registry, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        setattr(self, RECORDS, OrderedDict(getattr(self, RECORDS)))

    return __init__


def _moving_to_back(record: Callable[..., None]) -> Callable[..., None]:
    def record_retryable(self: Registry, lsid: bytes, txn_number: int, *args: Any) -> None:
        record(self, lsid, txn_number, *args)
        records: OrderedDict[tuple[bytes, int], Any] = getattr(self, RECORDS)
        with self._lock:  # stored again, its new time goes to the back
            if (lsid, txn_number) in records:
                records.move_to_end((lsid, txn_number))

    return record_retryable


def prune_oldest_first(self: Registry) -> None:
    """Drop the records past their lifetime and the oldest past the cap, from the front."""
    records: OrderedDict[tuple[bytes, int], tuple[Any, float, bytes]] = getattr(self, RECORDS)
    cutoff = self._time() - transactions._RETRYABLE_RECORD_LIFETIME_SECONDS
    while records:
        _reply, stored_at, _identity = next(iter(records.values()))
        if stored_at >= cutoff and len(records) <= transactions._RETRYABLE_RECORD_MAX:
            return
        records.popitem(last=False)


# Each patch of the store, and what runs as shipped when the installed SecantusDB is not the
# one it was written for.
PATCHES: tuple[tuple[Callable[[], bool], str], ...] = (
    (keep_records_in_order, "its retryable-write records are pruned by scanning them all"),
    (journal_flush.install, "every commit fsyncs under its lock"),
    (index_metadata.install, "a write reads its index definitions every time it needs them"),
    (profile_settings.install, "every command reads its profiler settings from the table"),
    (index_prefix.install, "a filter with a clause past an index's exact shape reads one clause"),
)


def main() -> int:
    for install, as_shipped in PATCHES:
        if not install():
            print(
                f"tessera.secantusd: {install.__module__}.{install.__name__} does not know this "
                f"SecantusDB's internals; it runs as shipped: {as_shipped}",
                file=sys.stderr,
            )
    return int(serve())


if __name__ == "__main__":
    sys.exit(main())
