"""At most `most` holders per key at once (requests to one endpoint, or for one account), the
waiters served in arrival order; a key with no holder and no waiter takes no memory."""

import asyncio
from collections.abc import Callable


class KeyedSlots:
    def __init__(self, most: int):
        self._most = most
        self._gates: dict[str, asyncio.Semaphore] = {}
        self._users: dict[str, int] = {}  # holders and waiters of each key's gate

    async def take(self, key: str) -> Callable[[], None]:
        """Wait for one of the key's slots; answers the function that gives it back (calling
        it again does nothing)."""
        gate = self._gates.get(key)
        if gate is None:
            gate = self._gates[key] = asyncio.Semaphore(self._most)
        self._users[key] = self._users.get(key, 0) + 1
        try:
            await gate.acquire()
        except BaseException:
            self._leave(key)
            raise
        given_back = False

        def give_back() -> None:
            nonlocal given_back
            if not given_back:
                given_back = True
                gate.release()
                self._leave(key)

        return give_back

    def _leave(self, key: str) -> None:
        self._users[key] -= 1
        if self._users[key] == 0:
            del self._users[key]
            del self._gates[key]
