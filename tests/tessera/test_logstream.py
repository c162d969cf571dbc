"""The terminal view of the services' JSON logs: a line per request, warnings and errors."""

import io
import json
from pathlib import Path

from rich.console import Console

from tessera.logstream import LogStream, format_line


def _json(**fields: str) -> str:
    base = {"ts": "2026-11-25T04:54:45.699+00:00", "level": "info", "service": "api"}
    return json.dumps(base | fields)


def test_a_request_line_is_short_and_coloured_by_status() -> None:
    line = format_line(_json(logger="tessera.access", msg="POST /v1/templates -> 201 in 8.9 ms"))
    assert line is not None
    assert line.plain == "04:54:45.699 api        POST /v1/templates -> 201 in 8.9 ms"
    assert any(span.style == "green" for span in line.spans)
    failed = format_line(_json(logger="tessera.access", msg="GET /v1/passes -> 503 in 1 ms"))
    assert failed is not None
    assert any(span.style == "bold red" for span in failed.spans)


def test_probes_and_routine_info_are_left_to_the_files() -> None:
    assert format_line(_json(logger="tessera.access", msg="GET /readyz -> 200 in 1.5 ms")) is None
    assert format_line(_json(logger="uvicorn.error", msg="Started server process")) is None
    assert format_line("") is None


def test_warnings_errors_and_non_json_lines_are_shown() -> None:
    error = format_line(
        _json(
            level="error",
            service="issuer",
            replica="issuer-2",
            logger="x",
            msg="unhandled error",
            exc="Traceback (most recent call last):\n  ...\nTypeError: boom\n",
        )
    )
    assert error is not None
    assert error.plain == "04:54:45.699 issuer-2   ERROR unhandled error  (TypeError: boom)"
    crash = format_line("ModuleNotFoundError: No module named 'x'")
    assert crash is not None
    assert crash.plain == "ModuleNotFoundError: No module named 'x'"


def test_the_stream_shows_only_new_whole_lines(tmp_path: Path) -> None:
    log = tmp_path / "api.log"
    log.write_text(_json(logger="tessera.access", msg="GET /v1/old -> 200 in 1 ms") + "\n")
    later = tmp_path / "events.log"  # appears after the stream starts
    out = io.StringIO()
    stream = LogStream([log, later], Console(file=out, width=200))
    split = _json(logger="tessera.access", msg="GET /v1/half -> 404 in 1 ms")
    with log.open("a") as handle:
        handle.write(_json(logger="tessera.access", msg="GET /v1/new -> 200 in 1 ms") + "\n")
        handle.write(split[:40])
    later.write_text(_json(level="warning", service="events", msg="slow") + "\n")
    stream.pump()
    with log.open("a") as handle:
        handle.write(split[40:] + "\n")
    stream.pump()
    lines = out.getvalue().splitlines()
    assert [line[13:] for line in lines] == [
        "api        GET /v1/new -> 200 in 1 ms",
        "events     WARNING slow",
        "api        GET /v1/half -> 404 in 1 ms",
    ]
