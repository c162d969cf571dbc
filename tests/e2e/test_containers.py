"""The same stack on real `mongo` and `nats` containers (testcontainers), where Docker exists.

`TESSERA_TEST_BACKEND=containers make test` runs the whole end-to-end suite that way; this test
always tries, so a machine with Docker checks the production servers on every run. Here, with no
Docker engine, it skips and says why.
"""

from pathlib import Path

import pytest

from tests.support.api import TEMPLATE_BODY, all_events, create_template
from tests.support.polling import poll
from tests.support.servers import container_mongo, container_nats
from tests.support.stack import new_stack

pytestmark = [pytest.mark.e2e, pytest.mark.containers]


def test_issue_and_record_on_real_mongo_and_nats(tmp_path: Path) -> None:
    with container_mongo() as mongo_url, container_nats() as nats_url:
        stack = new_stack(nats_url, mongo_url, tmp_path)
        try:
            stack.start()
            account = stack.new_account()
            with stack.client(headers=account.headers()) as client:
                template = create_template(client, TEMPLATE_BODY)
                issued = client.post("/v1/passes", json={"template_id": template["id"]})
                assert issued.status_code == 200
                events = poll(lambda: all_events(client), lambda found: len(found) == 1)
            assert events[0]["pass_id"] == issued.json()["id"]
        finally:
            stack.stop()
