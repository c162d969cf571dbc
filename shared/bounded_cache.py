"""A least-recently-used cache bounded by the total size of its values, safe across threads.

`size_of` weighs a value (its bytes, or 1 to bound the number of entries).

Used for content-addressed values that never change once computed (cleaned PNGs, the image set
of a design, a stored asset set), so entries never need invalidating, only evicting.
"""

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class BoundedCache(Generic[K, V]):
    def __init__(self, max_size: int, size_of: Callable[[V], int]):
        self._max_size = max_size
        self._size_of = size_of
        self._entries: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._size = 0
        # Values are computed in worker threads (asyncio.to_thread) as well as on the loop.
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            self._entries.move_to_end(key)
            return entry[0]

    def put(self, key: K, value: V) -> None:
        size = self._size_of(value)
        if size > self._max_size:
            return  # would evict everything else and still not fit
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._size -= old[1]
            self._entries[key] = (value, size)
            self._size += size
            while self._size > self._max_size:
                _, (_, evicted) = self._entries.popitem(last=False)
                self._size -= evicted

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def size(self) -> int:
        return self._size
