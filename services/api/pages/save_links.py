"""Google save links the api got signed, reused for a minute per pass version.

Every GET of `{site_url}/p/{short_id}/google` (or a download link's) asked the issuer to sign the
pass's save link: an RSA signature over the whole object, about a .pkpass build of CPU. The
redirect is public, so anyone holding a pass URL could keep the issuers signing. A link signed
for a pass version is the same link a minute later (there is no `exp`, and the pass has not
changed), so this replica hands it out again for `REUSE_SECONDS`; a new version (an update, a
void, a redaction) is signed afresh. Kept in memory for at most `MAX_LINKS` passes.
"""

from collections import OrderedDict
from datetime import datetime, timedelta

REUSE_SECONDS = 60.0
MAX_LINKS = 10_000


class SaveLinks:
    def __init__(self, reuse_seconds: float = REUSE_SECONDS, max_links: int = MAX_LINKS):
        self._reuse = timedelta(seconds=reuse_seconds)
        self._max = max_links
        self._links: OrderedDict[tuple[str, int], tuple[str, datetime]] = OrderedDict()

    def get(self, pass_id: str, version: int, now: datetime) -> str | None:
        found = self._links.get((pass_id, version))
        if found is None or now - found[1] >= self._reuse:
            return None
        return found[0]

    def put(self, pass_id: str, version: int, url: str, now: datetime) -> None:
        self._links[(pass_id, version)] = (url, now)
        self._links.move_to_end((pass_id, version))
        while len(self._links) > self._max:
            self._links.popitem(last=False)
