"""A test run holding one of each thing tests start, until it is stopped: tests/test_stopped_run.py
runs this module as a pytest of its own (the suite never collects it: no test_ in its name).

It holds a `simplequeue serve` in the run's process group (as tests/test_e2e.py starts them), two
in sessions of their own (as the fault suite starts them): one on the session's database of the
shared server, one on the private PostgreSQL cluster (its own session too, its folder in TMPDIR).
Once all run, it writes what it holds to SIMPLEQUEUE_TEST_HELD (their pids with their start
times, the database, the folder) and waits to be stopped. Its first finalizer touches
SIMPLEQUEUE_TEST_HELD + ".teardown", for a second Ctrl-C to come while the others run. The other
test leaks a process no finalizer stops, for the run's last cleanup to find, and fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.faults.helpers import PrivatePostgres, ServiceFactory, children_of
from tests.test_e2e import serving

HELD = os.environ.get("SIMPLEQUEUE_TEST_HELD", "")
HOLD_AT_MOST = 120  # seconds: the test that runs this stops it within a few
_forgotten: list[subprocess.Popen[bytes]] = []


def started_at(pid: int) -> str:
    """The process's start time (in clock ticks since boot): a pid with another is another process."""
    return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[19]


@pytest.fixture
def tearing_down() -> Iterator[None]:
    """Requested last, so finalized first: says that the finalizers have begun."""
    yield
    if HELD:
        Path(HELD + ".teardown").touch()


def test_holds_processes_a_database_and_a_folder_until_stopped(
    postgres_url: str,
    private_postgres: PrivatePostgres,
    services: ServiceFactory,
    tmp_path: Path,
    tearing_down: None,
) -> None:
    if not HELD:
        pytest.skip("run by tests/test_stopped_run.py, which stops it")
    services(postgres_url, name="on-the-shared-server")
    services(private_postgres.url, name="on-the-private-cluster")
    with serving(f"sqlite:///{tmp_path / 'held.db'}"):
        database = urlsplit(postgres_url).path.lstrip("/")
        write_held(database=database, folder=str(private_postgres.root))
        deadline = time.monotonic() + HOLD_AT_MOST
        while time.monotonic() < deadline:
            time.sleep(0.05)
    pytest.fail(f"not stopped within {HOLD_AT_MOST} s")


def test_leaves_a_process_that_no_finalizer_stops_and_fails() -> None:
    if not HELD:
        pytest.skip("run by tests/test_stopped_run.py")
    # Forgotten by every finalizer, but referenced: a Popen collected while its process runs warns.
    _forgotten.append(subprocess.Popen(["sleep", str(HOLD_AT_MOST)], start_new_session=True))
    write_held()
    pytest.fail("failing on purpose, under -x")


def write_held(**more: str) -> None:
    """The run's processes now (pid: start time), and `more`, written whole to HELD."""
    processes = {}
    for pid in children_of(os.getpid()):
        try:
            processes[pid] = started_at(pid)
        except (OSError, IndexError):
            continue  # a short-lived helper (pg_isready) that just ended
    Path(HELD + ".part").write_text(json.dumps({"processes": processes, **more}))
    os.replace(HELD + ".part", HELD)  # whole or absent, for the test that waits on it
