"""Concurrent writes to one pass: every update lands, none is lost, each records one event."""

import threading
from collections import Counter

import pytest

from tests.support.api import TEMPLATE_BODY, all_events, create_template
from tests.support.polling import poll
from tests.support.stack import Stack

pytestmark = pytest.mark.e2e


def test_concurrent_patches_of_one_pass_all_apply(stack: Stack) -> None:
    account = stack.new_account()
    with stack.client(headers=account.headers()) as client:
        template = create_template(client, TEMPLATE_BODY)
        pass_id = client.post("/v1/passes", json={"template_id": template["id"]}).json()["id"]
    workers = 10
    barrier = threading.Barrier(workers)
    statuses: list[int] = []

    def patch(number: int) -> None:
        with stack.client(headers=account.headers()) as client:
            barrier.wait()
            response = client.patch(
                f"/v1/passes/{pass_id}", json={"metadata": {f"k{number}": number}}
            )
        statuses.append(response.status_code)

    threads = [threading.Thread(target=patch, args=(n,)) for n in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert statuses == [200] * workers
    with stack.client(headers=account.headers()) as client:
        final = client.get(f"/v1/passes/{pass_id}").json()
        # Metadata merges: a lost update would drop one of the keys.
        assert final["metadata"] == {f"k{n}": n for n in range(workers)}
        events = poll(lambda: all_events(client), lambda found: len(found) >= workers + 1)
    assert Counter(e["type"] for e in events) == {"created": 1, "updated": workers}
