"""The terminal view of `tessera up`: one readable, coloured line per request, and every warning
and error, read from the services' JSON log files as they grow.

The files stay JSON (what production ships and what tools parse); this only formats what is
new in them for a developer watching the terminal. Lines that are not JSON (a crash before
logging was configured) are shown as they are, since those are the ones worth seeing.
"""

import json
import re
from pathlib import Path

from rich.console import Console
from rich.text import Text

# Requests nobody watching the terminal needs: the launcher's and load balancers' probes.
_QUIET_PATHS = re.compile(r"^(GET|HEAD) /(readyz|healthz|metrics)\b")
_STATUS = re.compile(r"-> (\d)\d\d\b")
_STATUS_STYLES = {"2": "green", "3": "cyan", "4": "yellow", "5": "bold red"}
_LEVEL_STYLES = {"warning": "yellow", "error": "bold red", "critical": "bold red"}
ACCESS_LOGGER = "tessera.access"


def format_line(raw: str) -> Text | None:
    """The terminal line for one log line, or None for lines not worth showing."""
    raw = raw.rstrip("\n")
    if not raw.strip():
        return None
    try:
        record = json.loads(raw)
    except ValueError:
        return Text(raw)
    if not isinstance(record, dict):
        return Text(raw)
    level = str(record.get("level", "info"))
    message = str(record.get("msg", ""))
    is_access = record.get("logger") == ACCESS_LOGGER
    if level not in _LEVEL_STYLES and not (is_access and not _QUIET_PATHS.match(message)):
        return None
    style = _LEVEL_STYLES.get(level, "")
    if is_access and (status := _STATUS.search(message)):
        style = _STATUS_STYLES.get(status.group(1), style)
    source = str(record.get("replica") or record.get("service", "?"))
    line = Text.assemble(
        (str(record.get("ts", ""))[11:23], "dim"), " ", (f"{source:<10}", "bold blue"), " "
    )
    if not is_access:
        line.append(f"{level.upper()} ", style)
    line.append(message, style)
    if exc := record.get("exc"):
        # The exception's last line says what happened; the whole traceback is in the file.
        line.append(f"  ({str(exc).strip().splitlines()[-1]})", "red")
    return line


class LogStream:
    """Follows log files from their size at creation, so an earlier run's lines are not shown.
    A file written by a restarted process is the same file (opened to append), so it is
    followed on; a file that does not exist yet is read from its start once it appears."""

    def __init__(self, paths: list[Path], console: Console) -> None:
        self._console = console
        self._offsets = {path: path.stat().st_size if path.exists() else 0 for path in paths}
        self._partial = dict.fromkeys(paths, b"")

    def pump(self) -> None:
        """Print what the files gained since the last call (whole lines only)."""
        for path, offset in self._offsets.items():
            try:
                with path.open("rb") as handle:
                    handle.seek(offset)
                    chunk = handle.read()
            except FileNotFoundError:
                continue
            self._offsets[path] = offset + len(chunk)
            *lines, self._partial[path] = (self._partial[path] + chunk).split(b"\n")
            for raw in lines:
                text = format_line(raw.decode(errors="replace"))
                if text is not None:
                    self._console.print(text, soft_wrap=True, highlight=False)
