"""secantusd-py's queries narrowed by the longest prefix of an index that the filter pins.

SecantusDB 0.7.0b3 walks a compound index only when the filter names exactly the index's
leading fields, as equalities and at most one trailing range. A filter with one more clause
(`{status: "pending", next_attempt_at: {$lte: now}, lease_until: ...}`), or an `$in` before the
range (`{status: {$in: ["pending", "failed"]}, next_attempt_at: {$lte: now}}`), falls back to one
clause alone: every pending delivery, or the whole collection. The webhook scheduler's due
query is both; on 20,000 documents it read all of them (300 ms) where its index pins a few.

This looks, before SecantusDB's own choice, for the index whose leading fields the filter pins
furthest (equalities of plain values, at most one `$in` of plain values, which is looked up
value by value, then at most one range), and when that is at least two fields and more than
SecantusDB's exact shapes would serve, looks the pinned part up through SecantusDB's own
compound lookups. The candidates are a superset of the matches (the filter implies the pinned
part); SecantusDB's `matches()` still decides on each document, as it does after any index
lookup. Partial and sparse indexes are used only where SecantusDB itself would (the filter
implies the partial filter; a clause guarantees the sparse field). Anything else (a filter on
`_id`, geo and top-level operators) runs as shipped. If the installed SecantusDB does not have
what this relies on, nothing is changed and `install` says so.
"""

import datetime
import functools
from collections.abc import Callable, Mapping
from typing import Any

PLAIN = (str, int, float, bool, datetime.datetime)
RANGES = frozenset({"$gt", "$gte", "$lt", "$lte"})
# Values of an `$in` looked up one by one; a longer list runs as shipped.
MAX_IN_VALUES = 32
_NEEDED = (
    "_try_index_id_keys",
    "_try_compound_range_id_keys",
    "_try_compound_eq_id_keys",
    "_all_indexes",
    "_partial_filters",
    "_query_implies_partial",
    "_index_options_map",
    "_is_timeseries",
)


def install(storage: Any = None) -> bool:
    """Patch SecantusDB's Storage, or `storage` (a subclass of it), as the module's docstring
    says; False (and nothing changed) if its internals are not those of the version this was
    written for."""
    try:
        from secantus import storage as module
    except ImportError:
        return False
    storage = storage or module.Storage
    helpers = ("_parse_index_collation", "_sparse_index_usable")
    if not all(callable(getattr(storage, name, None)) for name in _NEEDED) or not all(
        callable(getattr(module, name, None)) for name in helpers
    ):
        return False
    storage._try_index_id_keys = _narrowed_first(storage._try_index_id_keys, module)
    return True


def _narrowed_first(shipped: Callable[..., Any], module: Any) -> Callable[..., Any]:
    @functools.wraps(shipped)
    def _try_index_id_keys(
        self: Any, db: str, coll: str, filter: dict[str, Any], *, collation: Any = None
    ) -> Any:
        found = _by_pinned_prefix(self, module, db, coll, filter, collation)
        if found is not None:
            return found
        return shipped(self, db, coll, filter, collation=collation)

    return _try_index_id_keys


def _by_pinned_prefix(
    storage: Any, module: Any, db: str, coll: str, filter: dict[str, Any], collation: Any
) -> list[Any] | None:
    """The candidates through the index prefix the filter pins furthest, or None (as shipped)."""
    if len(filter) < 2 or any(not isinstance(f, str) or f.startswith("$") for f in filter):
        return None
    if "_id" in filter or storage._is_timeseries(db, coll):
        # SecantusDB's point lookups on _id (one value or an $in of any length) are cheaper
        # than any prefix: a rollout's chunk read of 200 ids by account and mode read every
        # pass of the account through the (account_id, mode) prefix, 3x slower in all.
        return None
    best: _Pinned | None = None
    partials = storage._partial_filters(db, coll)
    options = storage._index_options_map(db, coll)
    for name, key_spec, sparse, _unique in storage._all_indexes(db, coll):
        if any(direction not in (1, -1) for direction in key_spec.values()):
            continue  # geo, hashed, text
        partial = partials.get(name)
        if partial is not None and not storage._query_implies_partial(filter, partial):
            continue
        if sparse and not module._sparse_index_usable(key_spec, filter):
            continue
        if module._parse_index_collation(options.get(name, {}).get("collation")) != collation:
            continue
        pinned = _pinned(list(key_spec), filter)
        if pinned.width >= 2 and (best is None or pinned.width > best.width):
            best = pinned
    if best is None or (best.in_field is None and best.width == len(filter)):
        return None  # SecantusDB's own compound lookups serve exactly this shape
    return best.lookup(storage, db, coll, collation)


class _Pinned:
    """The leading fields of one index that a filter pins: equalities, an `$in`, a range."""

    def __init__(self) -> None:
        self.equal: dict[str, Any] = {}
        self.in_field: str | None = None
        self.in_values: list[Any] = []
        self.range: tuple[str, dict[str, Any]] | None = None

    @property
    def width(self) -> int:
        return len(self.equal) + (self.in_field is not None) + (self.range is not None)

    def lookup(self, storage: Any, db: str, coll: str, collation: Any) -> list[Any] | None:
        parts: list[dict[str, Any]] = [dict(self.equal)]
        if self.in_field is not None:
            parts = [{**self.equal, self.in_field: value} for value in self.in_values]
        found: dict[Any, None] = {}
        for part in parts:
            if self.range is not None:
                field, ops = self.range
                keys = storage._try_compound_range_id_keys(
                    db, coll, {**part, field: ops}, collation=collation
                )
            else:
                keys = storage._try_compound_eq_id_keys(db, coll, part, collation=collation)
            if keys is None:
                return None
            found.update(dict.fromkeys(keys))
        return list(found)


def _pinned(fields: list[str], filter: Mapping[str, Any]) -> _Pinned:
    pinned = _Pinned()
    for field in fields:
        clause = filter.get(field)
        if isinstance(clause, PLAIN):
            pinned.equal[field] = clause
            continue
        if not isinstance(clause, dict) or not clause:
            break
        values = clause.get("$in")
        if (
            pinned.in_field is None
            and set(clause) == {"$in"}
            and isinstance(values, list)
            and 0 < len(values) <= MAX_IN_VALUES
            and all(isinstance(value, PLAIN) for value in values)
        ):
            pinned.in_field, pinned.in_values = field, list(values)
            continue
        if set(clause) <= RANGES and all(isinstance(bound, PLAIN) for bound in clause.values()):
            pinned.range = (field, dict(clause))
        break
    if pinned.range is not None and not (pinned.equal or pinned.in_field):
        pinned.range = None  # a range alone is one field: as shipped
    return pinned
