"""`simplequeue serve` says at start where a person finds the dashboard and the API's docs: the real
URLs of the address and port it listens on (the port the system chose, for --port 0; a wildcard
bind named as such; SIMPLEQUEUE_PUBLIC_URL when set), with one worker or several."""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from simplequeue.api.server import where_the_pages_are

from tests.test_e2e import free_port, simplequeue_command

pytestmark = pytest.mark.e2e

LINE = re.compile(r"the dashboard: (\S+/ui/); the API's docs: (\S+/docs) and (\S+/redoc)")
UVICORN = re.compile(r"Uvicorn running on (http://\S+)")


@contextmanager
def served(tmp_path: Path, *args: str) -> Iterator[Path]:
    """`simplequeue serve *args` on a fresh SQLite file, until its start-up log names the pages
    and it answers there; the log file."""
    log = tmp_path / "serve.log"
    env = {**os.environ, "SIMPLEQUEUE_DATABASE_URL": f"sqlite:///{tmp_path / 'start.db'}"}
    with log.open("w") as sink:
        process = subprocess.Popen(
            [*simplequeue_command(), "serve", *args], env=env, stderr=sink, stdout=sink
        )
    try:
        deadline = time.monotonic() + 30
        while not (LINE.search(log.read_text()) and (listening := UVICORN.search(log.read_text()))):
            assert process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        while not answers(f"{listening.group(1)}/readyz"):  # several workers: logged before they start
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        yield log
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1).status_code == 200
    except httpx.TransportError:
        return False


@pytest.mark.parametrize("workers", ["1", "2"])
def test_the_start_up_log_names_the_dashboard_and_the_docs(tmp_path: Path, workers: str) -> None:
    port = "0" if workers == "1" else str(free_port())  # one worker: the system chooses the port
    with served(tmp_path, "--port", port, "--workers", workers) as log:
        text = log.read_text()
        [listening] = UVICORN.findall(text)
        line = LINE.search(text)
        assert line is not None
        assert line.groups() == (f"{listening}/ui/", f"{listening}/docs", f"{listening}/redoc")
        assert port == "0" or listening == f"http://127.0.0.1:{port}"
        dashboard = httpx.get(line.group(1))
        assert (dashboard.status_code, "<title>simplequeue</title>" in dashboard.text) == (200, True)
        for page in line.groups()[1:]:
            assert httpx.get(page).status_code == 200, page
        assert httpx.get(f"{listening}/").headers["Location"] == "/ui/"


@pytest.mark.parametrize(
    ("host", "public_url", "base", "says"),
    [
        ("127.0.0.1", None, "http://127.0.0.1:8000", ""),
        ("localhost", None, "http://localhost:8000", ""),
        ("::1", None, "http://[::1]:8000", ""),
        ("10.1.2.3", None, "http://10.1.2.3:8000", ""),
        ("0.0.0.0", None, "http://127.0.0.1:8000", " (bound to 0.0.0.0, every address here: from elsewhere"),
        ("::", None, "http://[::1]:8000", " (bound to ::, every address here: from elsewhere"),
        ("0.0.0.0", "https://queue.example.com/", "https://queue.example.com", ""),
    ],
)
def test_the_line_names_real_urls(host: str, public_url: str | None, base: str, says: str) -> None:
    line = where_the_pages_are(host, 8000, public_url)
    assert line.startswith(f"the dashboard: {base}/ui/; the API's docs: {base}/docs and {base}/redoc{says}")
    assert bool(says) == line.endswith(")")
