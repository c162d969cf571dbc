"""A cap on the events the public pages record per pass (docs/pages.md#the-urls).

Anyone holding a pass's URL can fetch its page or file as often as they like; each GET of a
person (not a bot) records a `url_viewed` or `downloaded` event, which is stored for good and
becomes a webhook to the account's systems. Past `PER_PASS_PER_MINUTE` events of one pass in a
minute on a replica, the page is served as always and the event is not recorded. Kept in
memory per replica (at most `MAX_PASSES` passes, the least recently seen forgotten first):
with N replicas a pass records at most N times the cap, which bounds it all the same.
"""

from collections import OrderedDict
from datetime import datetime

PER_PASS_PER_MINUTE = 20
MAX_PASSES = 100_000


class ObservedEventLimit:
    def __init__(self, per_minute: int = PER_PASS_PER_MINUTE, max_passes: int = MAX_PASSES):
        self._per_minute = per_minute
        self._max_passes = max_passes
        self._windows: OrderedDict[str, tuple[int, int]] = OrderedDict()

    def allow(self, pass_id: str, now: datetime) -> bool:
        """Whether one more event of the pass may be recorded now (and count it if so)."""
        minute = int(now.timestamp() // 60)
        window, count = self._windows.pop(pass_id, (minute, 0))
        if window != minute:
            window, count = minute, 0
        allowed = count < self._per_minute
        self._windows[pass_id] = (window, count + 1 if allowed else count)
        if len(self._windows) > self._max_passes:
            self._windows.popitem(last=False)
        return allowed
