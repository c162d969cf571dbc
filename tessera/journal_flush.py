"""secantusd-py's journal flushed once per reply, outside its locks: group commit, as mongod does.

`tessera up` runs the store with `--sync-on-commit` so that a write acknowledged with `j: true`
is on disk (docs/operations.md#durability-of-writes). SecantusDB 0.7.0b3 does that by having
WiredTiger fsync its log inside every commit, and every commit runs under the store's locks (a
collection's for single writes, the store's for a transaction's commit): a write waits for the
fsyncs of every write before it on the same lock, one by one, and a writer's CPU stands idle
meanwhile. mongod instead commits in memory and lets each `j: true` reply wait for the journal
flush, which one fsync serves for every writer waiting on it.

The same here, in two steps:
1. WiredTiger is opened with `transaction_sync=(enabled=true,method=none)`: each commit still
   writes its log record to the operating system before it returns (a kill -9 of the store loses
   nothing committed, as before), but does not fsync under the lock.
2. A command that asked for `j: true` (a transaction's commit included, a retried write answered
   from its stored reply, a schema change) flushes the log to disk
   (`WT_SESSION::log_flush(sync=on)`) after the command ran and its locks were released, before
   its reply is sent. WiredTiger's flush syncs everything written up to then and returns at once
   when an earlier flush synced it already, so writers waiting together share one fsync.

So an acknowledged `j: true` write is on disk as before. A write acknowledged without `j` (the
rate-limit and quota counters, idempotency records: `shared/mongo.py` `unjournaled()`) survives
a kill -9 of the store (its record is in the file system) but not a power loss before the
operating system writes it out, as on mongod. As on mongod, another connection can read a
committed write in the moment before its flush ends. If the installed SecantusDB or WiredTiger
does not have what this relies on, nothing is changed and `install` says so.
"""

from collections.abc import Callable
from typing import Any

SYNCED_ON_COMMIT = "transaction_sync=(enabled=true,method=fsync)"
WRITTEN_ON_COMMIT = "transaction_sync=(enabled=true,method=none)"


def install() -> bool:
    """Patch WiredTiger's binding and SecantusDB's command dispatch as the module's docstring
    says; False (and nothing changed) if they are not what this was written for."""
    try:
        import wiredtiger
        from secantus import server, storage
    except ImportError:
        return False
    session: Any = getattr(wiredtiger, "Session", None)
    needed = (
        callable(getattr(wiredtiger, "wiredtiger_open", None))
        and getattr(storage, "wt", None) is wiredtiger
        and callable(getattr(session, "commit_transaction", None))
        and callable(getattr(session, "log_flush", None))
        and callable(getattr(server, "dispatch", None))
        and callable(getattr(storage.Storage, "_session", None))
    )
    if not needed:
        return False
    wiredtiger.wiredtiger_open = _writing_without_sync(wiredtiger.wiredtiger_open)
    session.commit_transaction = _writing_commits(session.commit_transaction)
    server.dispatch = _flushing_before_reply(server.dispatch)
    return True


def _writing_without_sync(wiredtiger_open: Callable[..., Any]) -> Callable[..., Any]:
    def open_writing_without_sync(home: str, config: str, *args: Any) -> Any:
        return wiredtiger_open(home, config.replace(SYNCED_ON_COMMIT, WRITTEN_ON_COMMIT), *args)

    return open_writing_without_sync


def _writing_commits(commit: Callable[..., Any]) -> Callable[..., Any]:
    def commit_transaction(self: Any, config: str | None = None) -> Any:
        # `sync=on` (a single write with j: true) would fsync here, under the lock: the
        # connection's setting writes the record instead, and the reply flushes it.
        return commit(self, None if config == "sync=on" else config)

    return commit_transaction


def _flushing_before_reply(
    dispatch: Callable[[dict[str, Any], Any], dict[str, Any]],
) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    def dispatch_then_flush(body: dict[str, Any], ctx: Any) -> dict[str, Any]:
        reply = dispatch(body, ctx)
        if wants_journal(body):
            # Whatever the command did: a retried write answered from its stored reply, or a
            # schema change whose writes WiredTiger committed by itself, is acknowledged only
            # once on disk too. A flush with nothing left to sync returns at once. One that
            # fails raises: no reply, the connection is dropped, nothing is acknowledged.
            if getattr(ctx.storage, "_closed", False):
                raise RuntimeError("the store is closing: the journal cannot be flushed")
            ctx.storage._session().log_flush("sync=on")
        return reply

    return dispatch_then_flush


def wants_journal(body: dict[str, Any]) -> bool:
    """Whether the command asked to be acknowledged once in the journal (`j: true`)."""
    concern = body.get("writeConcern")
    return isinstance(concern, dict) and bool(concern.get("j"))
