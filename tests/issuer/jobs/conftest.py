"""The job store on the issuer's test database, for the job tests."""

import pytest

from services.issuer.jobs.store import JobStore
from services.issuer.repository import IssuerRepository


@pytest.fixture
async def store(repo: IssuerRepository) -> JobStore:
    jobs = JobStore(repo.db)
    await jobs.ensure_indexes()
    return jobs
