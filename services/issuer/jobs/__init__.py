"""Jobs: long work (imports, bulk updates, template rollouts) as chunks any issuer replica takes.

A job is one document in `jobs` (its state and forward-only counters) and its work is documents
in `job_chunks` (a few hundred rows or pass ids each, with a status, a lease and per-row
outcomes). The job worker (worker.py) takes pending chunks on the shared leased poller, hands
each to the handler its job type registered (registry.py), and commits the handler's writes,
the chunk's outcome and the job's counters in one transaction. docs/architecture.md#jobs.
"""
