"""The pure helpers of bench.profile: reading py-spy's raw stacks."""

from bench.profile import Hotspot, frame_name, hotspots, top_self
from bench.stack import REPO_ROOT

RAW = [
    f"thread (1);serve ({REPO_ROOT}/shared/runner.py:10);handle ({REPO_ROOT}/services/a.py:3) 6",
    f"thread (1);serve ({REPO_ROOT}/shared/runner.py:10);w (/lib/python3.11/asyncio/t.py:9) 4",
    "not a stack line",
]


def test_frame_name_drops_line_numbers_and_roots() -> None:
    assert frame_name(f"handle ({REPO_ROOT}/services/a.py:3)") == "handle (services/a.py)"
    assert frame_name("f (/v/lib/python3.11/site-packages/pymongo/x.py:1)") == "f (pymongo/x.py)"
    assert frame_name("<unparsed>") == "<unparsed>"


def test_hotspots_inclusive_and_self() -> None:
    total, spots = hotspots(RAW)
    assert total == 10
    assert spots[0] == Hotspot("serve (shared/runner.py)", 100.0, 0.0)
    assert Hotspot("handle (services/a.py)", 60.0, 60.0) in spots
    _, own_code = hotspots(RAW, keep=("services/",))
    assert [spot.function for spot in own_code] == ["handle (services/a.py)"]
    assert [spot.self_pct for spot in top_self(RAW)] == [60.0, 40.0]
