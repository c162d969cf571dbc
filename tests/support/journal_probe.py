"""The store as `tessera up` runs it (tessera/secantusd.py), writing down every WiredTiger commit
and log flush it makes: `python -m tests.support.journal_probe LOG [secantusd-py's arguments]`.
Each line is `commit <config>` or `flush <config>`, written before the call returns, so a client
that got its reply finds the lines of the calls that came before it."""

import sys
import threading
from typing import Any

import wiredtiger

from tessera import secantusd


def main() -> int:
    log = open(sys.argv[1], "a", buffering=1)  # noqa: SIM115  # open while the store runs
    lock = threading.Lock()
    commit = wiredtiger.Session.commit_transaction
    flush = wiredtiger.Session.log_flush

    def note(line: str) -> None:
        with lock:
            log.write(line + "\n")

    def noted_commit(self: Any, config: str | None = None) -> Any:
        result = commit(self, config)
        note(f"commit {config}")
        return result

    def noted_flush(self: Any, config: str | None = None) -> Any:
        result = flush(self, config)
        note(f"flush {config}")
        return result

    # Below the store's own patches, which wrap these: the lines say what reaches WiredTiger.
    wiredtiger.Session.commit_transaction = noted_commit
    wiredtiger.Session.log_flush = noted_flush
    sys.argv = [sys.argv[0], *sys.argv[2:]]
    return secantusd.main()


if __name__ == "__main__":
    sys.exit(main())
