"""One `tessera up` per data directory: an exclusive lock taken before anything else is touched.

A second stack on the same directory would start a second nats-server on the same JetStream
store and delete the first stack's ready.json. flock(2) rather than a pid file: the kernel drops
the lock when the process exits however it exits, so a crash leaves no stale lock behind. The
lock is on an open file description that children do not inherit (PEP 446), so it is held by
the launcher alone. The standard library is enough here: the `filelock` package is only a
transitive dev dependency and would have to join the runtime lock for twenty lines.
"""

import fcntl
import os
from pathlib import Path

LOCK_FILE = "tessera.lock"


class DataDirBusy(Exception):
    """Another process holds the data directory's lock."""

    def __init__(self, shown: Path, pid: int | None) -> None:
        holder = f"pid {pid}" if pid is not None else "pid unknown"
        super().__init__(
            f"a Tessera stack ({holder}) already runs on {shown}; stop it or use --data-dir"
        )
        self.pid = pid


def lock_data_dir(data_dir: Path, shown: Path | None = None) -> int:
    """Take the lock of `data_dir` (created if missing) and write this pid into it.

    Returns the descriptor that holds the lock: keep it open for the life of the stack.
    Raises DataDirBusy, naming `shown` (the directory as the user wrote it), when it is taken.
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        pid = _holder(fd)
        os.close(fd)
        raise DataDirBusy(shown or data_dir, pid) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def _holder(fd: int) -> int | None:
    """The pid the holder wrote; None in the instant between its flock and its write."""
    text = os.pread(fd, 32, 0).decode(errors="replace").strip()
    return int(text) if text.isdigit() else None
