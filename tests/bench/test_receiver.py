"""The receiver of bench.webhooks, in its own process: deliveries are answered and recorded
with their arrival time, the first of a level is kept as the raw-POST sample, and raw POSTs
are answered without being recorded."""

import json
import time
from pathlib import Path

import httpx2

from bench.webhooks import receiver


def _delivery(created_at: str) -> str:
    return json.dumps({"id": "evt_1", "created_at": created_at, "data": {}})


def test_deliveries_are_answered_recorded_and_sampled(tmp_path: Path) -> None:
    with receiver(tmp_path) as (base, collector):
        assert collector.sample is None
        headers = {"webhook-id": "whd_1", "webhook-signature": "v1,abc"}
        body = _delivery("2026-11-25T12:00:00.000Z")
        before = time.time()
        answer = httpx2.post(f"{base}/level-1-10-0-False/3", content=body, headers=headers)
        assert answer.status_code == 200
        raw = httpx2.post(f"{base}/raw/0", content=body, headers=headers)
        assert raw.status_code == 200
        deadline = time.monotonic() + 10
        while not (arrivals := collector.for_paths("/level-1-")):
            assert time.monotonic() < deadline, "the delivery was not recorded"
            time.sleep(0.02)
        sample = collector.sample
    [arrival] = arrivals
    assert arrival.delivery_id == "whd_1"
    assert arrival.webhook_path == "/level-1-10-0-False/3"
    assert arrival.event_created_at == 1795608000.0
    assert before <= arrival.received_at <= time.time()
    assert collector.for_paths("/raw/") == []
    assert sample is not None
    assert sample[0] == body.encode()
    assert sample[1]["webhook-signature"] == "v1,abc"
