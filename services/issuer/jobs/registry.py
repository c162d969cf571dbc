"""Job types: what the worker calls to do one chunk of a job of each type.

A job type registers a `JobHandler` under its name. The worker leases a chunk, gives it with
its job to the handler, and commits what the handler returns (`ChunkResult`) in one
transaction with the chunk's outcome and the job's counters, so a handler never writes: it
prepares (reads, validates, renders, signs) and says what to write. Everything a handler does
for a chunk must be safe to do again: a chunk whose replica died is done again from the start
once its lease expires; the chunk's guarded commit (only while the chunk is pending under the
claim's lease) makes sure that only one run's writes are ever committed.
"""

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from services.issuer.jobs.store import Chunk
from services.issuer.repository import UnitOfWork
from shared.models import JobRecord, JobRowOutcome
from shared.outbox import OutboxMessage


async def _no_writes(uow: UnitOfWork) -> None:
    return None


@dataclass
class ChunkResult:
    """What one chunk came to: an outcome per row (or pass), and the writes and events to
    commit with them."""

    outcomes: list[JobRowOutcome]
    write: Callable[[UnitOfWork], Awaitable[None]] = _no_writes
    events: list[OutboxMessage] = field(default_factory=list)


class NotYet(Exception):
    """A handler's chunk cannot be done yet (it waits for the job's other chunks): the worker
    gives it back, to be claimed again after `seconds`, not counted as an attempt."""

    def __init__(self, seconds: float):
        super().__init__(f"not yet: again in {seconds} s")
        self.seconds = seconds


class JobHandler(Protocol):
    async def run(self, job: JobRecord, chunk: Chunk) -> ChunkResult:
        """Prepare the chunk's work (no writes: the worker commits the result)."""
        ...


class JobRegistry:
    """Job type name -> its handler."""

    def __init__(self) -> None:
        self._handlers: dict[str, JobHandler] = {}

    def register(self, job_type: str, handler: JobHandler) -> None:
        assert job_type not in self._handlers, f"job type {job_type} registered twice"
        self._handlers[job_type] = handler

    def handler(self, job_type: str) -> JobHandler | None:
        return self._handlers.get(job_type)

    @property
    def types(self) -> Sequence[str]:
        return list(self._handlers)
