"""`tessera import FILE.csv --template tmpl_...` and `tessera jobs watch ID`: a client of the
jobs API (docs/api-decisions.md#jobs) with a live progress bar (rich), rate and ETA.

The import uploads the CSV as is (POST /v1/jobs/import_passes), watches the job until it
finishes and writes its results (one CSV line per row: pass id and links, or the error). Its
Idempotency-Key is derived from the template and the file's bytes unless given, so running the
same command again after an interruption resumes that import instead of starting a second one.
The API keeps a key for 24 hours only, so the command also notes the job beside the file
(`FILE.import.json`): run again any time later, it answers that job (its results) instead of
importing every row a second time, or, once the API no longer knows the job (past its 90 days
of retention), says so and exits 1; `--again` imports the file anew.
The base URL and the API key come from flags or from TESSERA_BASE_URL (default: `tessera up`'s
http://127.0.0.1:8000) and TESSERA_KEY.
"""

import csv
import hashlib
import json
import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

FINISHED = frozenset({"succeeded", "failed", "canceled"})
POLL_SECONDS = 0.5
# A poll that fails for a moment (a 429, a 5xx, the api restarting) is tried again this long.
POLL_PATIENCE_SECONDS = 120.0
RETRIED_STATUSES = frozenset({429, 500, 502, 503, 504})
UPLOAD_TIMEOUT_SECONDS = 600.0
REQUEST_TIMEOUT_SECONDS = 30.0
# Where `tessera up` serves the API by default.
DEFAULT_BASE_URL = "http://127.0.0.1:8000"


class JobsError(Exception):
    """Something the command reports and exits 1 for (the API's error message, say)."""


@dataclass(frozen=True)
class Target:
    base_url: str
    key: str

    @classmethod
    def of(cls, base_url: str | None, key: str | None) -> "Target":
        url = base_url or os.environ.get("TESSERA_BASE_URL") or DEFAULT_BASE_URL
        secret = key or os.environ.get("TESSERA_KEY")
        if not secret:
            raise JobsError("set an API key with --key or TESSERA_KEY")
        return cls(url.rstrip("/"), secret)

    def client(self, timeout: float = REQUEST_TIMEOUT_SECONDS) -> httpx2.Client:
        headers = {"Authorization": f"Bearer {self.key}"}
        return httpx2.Client(base_url=self.base_url, headers=headers, timeout=timeout)


class RateColumn(ProgressColumn):
    """Rows processed per second (rich's own speed column counts bytes)."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text("" if speed is None else f"{speed:,.0f} rows/s", style="progress.data.speed")


def _answer(response: httpx2.Response, *expected: int) -> dict[str, Any]:
    if response.status_code not in expected:
        try:
            error = response.json()["error"]
            detail = f"{error['message']} ({error['type']}, param {error['param']})"
        except (ValueError, KeyError, TypeError):
            detail = response.text[:300]
        raise JobsError(
            f"{response.request.method} {response.request.url.path}: "
            f"{response.status_code} {detail}"
        )
    body: dict[str, Any] = response.json()
    return body


def import_key(template_id: str, data: bytes, *, anew: bool = False) -> str:
    """The Idempotency-Key of importing these bytes into this template; `anew`: of importing
    them once more (`--again`: the derived key would replay the last import for 24 hours)."""
    digest = hashlib.sha256(template_id.encode() + b"\0" + data).hexdigest()
    suffix = f"-{secrets.token_hex(8)}" if anew else ""
    return f"tessera-import-{digest[:40]}{suffix}"


def marker_path(path: Path) -> Path:
    return path.with_name(f"{path.name}.import.json")


def _file_digest(template_id: str, data: bytes) -> str:
    return hashlib.sha256(template_id.encode() + b"\0" + data).hexdigest()


def noted_job(target: Target, path: Path, template_id: str) -> dict[str, Any] | None:
    """The job an earlier run made of this very file and template (None: no such run);
    JobsError when the API no longer has it."""
    marker = marker_path(path)
    try:
        noted = json.loads(marker.read_text())
    except (OSError, ValueError):
        return None
    digest = _file_digest(template_id, path.read_bytes())
    if not isinstance(noted, dict) or noted.get("sha256") != digest:
        return None  # another file, or another template: a new import
    with target.client() as client:
        response = client.get(f"/v1/jobs/{noted.get('job_id')}")
    if response.status_code == 404:
        # Deleted past its retention (90 days), made with another account's key, or a store
        # that was reset: this file was imported, and importing it again makes every pass a
        # second time, so only when asked to.
        raise JobsError(
            f"this file was imported as job {noted.get('job_id')} ({marker_path(path).name}), "
            "which the API no longer knows (past its retention, another account, or a reset "
            "store); run with --again to import it anew"
        )
    return _answer(response, 200)


def note_job(path: Path, template_id: str, job: dict[str, Any]) -> None:
    digest = _file_digest(template_id, path.read_bytes())
    marker_path(path).write_text(json.dumps({"job_id": job["id"], "sha256": digest}) + "\n")


def upload(
    target: Target, path: Path, template_id: str, key: str | None, *, anew: bool = False
) -> dict[str, Any]:
    """Create the import job; its job object. A moment's failure is tried again with the same
    Idempotency-Key, so a retry after an upload that did land answers its job."""
    data = path.read_bytes()
    key = key or import_key(template_id, data, anew=anew)
    headers = {"Content-Type": "text/csv", "Idempotency-Key": key}
    with target.client(UPLOAD_TIMEOUT_SECONDS) as client:
        response = _patiently(
            lambda: client.post(
                "/v1/jobs/import_passes",
                params={"template_id": template_id},
                content=data,
                headers=headers,
            ),
            "the upload",
        )
    return _answer(response, 202)


def watch(target: Target, job_id: str, console: Console) -> dict[str, Any]:
    """Show the job's progress until it finishes; the finished job."""
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TaskProgressColumn(),
        RateColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
    )
    with target.client() as client, Progress(*columns, console=console) as progress:
        bar = progress.add_task(job_id, total=None)
        while True:
            job = _poll(client, job_id)
            progress.update(
                bar,
                total=job["total"] or None,
                completed=job["processed"],
                description=f"{job_id} {job['status']}",
            )
            if job["status"] in FINISHED:
                return job
            time.sleep(POLL_SECONDS)


def _poll(client: httpx2.Client, job_id: str) -> dict[str, Any]:
    """The job now: the job runs on whether or not this command watches it."""
    return _answer(_patiently(lambda: client.get(f"/v1/jobs/{job_id}"), "the job"), 200)


def _patiently(request: Callable[[], httpx2.Response], what: str) -> httpx2.Response:
    """`request`'s answer; a moment's failure (429, 5xx, no connection) is tried again for up
    to POLL_PATIENCE_SECONDS. Every request retried here is safe to send twice (a read, or
    the upload under its Idempotency-Key)."""
    deadline = time.monotonic() + POLL_PATIENCE_SECONDS
    while True:
        try:
            response = request()
            if response.status_code not in RETRIED_STATUSES and not _in_progress(response):
                return response
            failure = f"{response.status_code}"
        except httpx2.TransportError as exc:
            failure = type(exc).__name__
        if time.monotonic() > deadline:
            raise JobsError(f"the API did not answer for {what} ({failure}); try again later")
        time.sleep(POLL_SECONDS * 4)


def _in_progress(response: httpx2.Response) -> bool:
    """A retry that came while the first request under its key still runs (409): its answer
    is the first one's, once that has finished."""
    if response.status_code != 409:
        return False
    try:
        code = response.json()["error"]["code"]
    except (ValueError, KeyError, TypeError):
        return False
    return bool(code == "idempotency_request_in_progress")


def write_results(target: Target, job_id: str, out: Path) -> int:
    """Stream the job's results as CSV into `out`, replaced only once they are all there;
    how many rows it holds."""
    partial = out.with_name(f".{out.name}.partial")
    deadline = time.monotonic() + POLL_PATIENCE_SECONDS
    try:
        while True:
            try:
                rows = _download_results(target, job_id, partial)
                break
            except (httpx2.TransportError, _Retried) as exc:
                if time.monotonic() > deadline:
                    raise JobsError(
                        f"the API did not answer for the results ({exc}); try again later"
                    ) from None
                time.sleep(POLL_SECONDS * 4)
    except BaseException:
        # Cut short (an error, Ctrl-C): its pass links are not left half-written beside it.
        partial.unlink(missing_ok=True)
        raise
    partial.replace(out)
    return rows


class _Retried(Exception):
    """The results answered a status worth trying again (429, 5xx)."""


def _download_results(target: Target, job_id: str, partial: Path) -> int:
    rows = -1  # the header line
    with (
        target.client(UPLOAD_TIMEOUT_SECONDS) as client,
        client.stream(
            "GET", f"/v1/jobs/{job_id}/results", headers={"Accept": "text/csv"}
        ) as response,
    ):
        if response.status_code in RETRIED_STATUSES:
            raise _Retried(str(response.status_code))
        if response.status_code != 200:
            response.read()
            _answer(response, 200)
        with partial.open("wb") as file:
            for chunk in response.iter_bytes():
                file.write(chunk)
    with partial.open(newline="", encoding="utf-8") as written:
        # Records, not lines: a quoted cell may hold a line break, and a chunk may end
        # between a CR and its LF.
        rows += sum(1 for _ in csv.reader(written))
    return max(rows, 0)


def summary(job: dict[str, Any]) -> str:
    return (
        f"job {job['id']} {job['status']}: {job['succeeded']} passes issued, "
        f"{job['failed']} rows failed, of {job['total']}"
    )


def run_import(
    target: Target,
    path: Path,
    template_id: str,
    out: Path | None,
    key: str | None,
    console: Console,
    *,
    again: bool = False,
) -> int:
    results = out or path.with_name(f"{path.stem}.results.csv")
    if results.resolve() == path.resolve():
        raise JobsError("the results file would replace the CSV itself: choose another --output")
    job = None if again or key else noted_job(target, path, template_id)
    if job is not None:
        console.print(
            f"job {job['id']}: this file was imported already ({marker_path(path).name}); "
            "its results follow. Run with --again to import it a second time."
        )
    else:
        job = upload(target, path, template_id, key, anew=again)
        note_job(path, template_id, job)
        console.print(f"job {job['id']}: {job['total']} rows uploaded")
    done = watch(target, job["id"], console)
    rows = write_results(target, done["id"], results)
    console.print(summary(done))
    for entry in done["errors"][:5]:
        where = f"row {entry['row']}" if "row" in entry else entry.get("pass_id", "")
        console.print(f"  {where}: {entry['error']['message']}")
    console.print(f"results ({rows} rows): {results}")
    return 0 if done["status"] == "succeeded" else 1


def run_watch(target: Target, job_id: str, console: Console) -> int:
    done = watch(target, job_id, console)
    console.print(summary(done))
    return 0 if done["status"] == "succeeded" else 1
