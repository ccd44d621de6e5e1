"""However a test run ends, it leaves nothing behind: no process, no database on the shared
server, no folder (tests/stopping.py). A pytest of its own runs tests/faults/run_until_stopped.py,
which holds one of each (serve processes in the run's process group and in sessions of their own,
the private PostgreSQL cluster, a test database) and says so in a file; the run is then stopped as
a terminal's Ctrl-C does (SIGINT to the whole process group, pressed twice), as a supervisor does
(SIGTERM to pytest alone), or by its own failure under -x, leaving a process no finalizer stops."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.engines import POSTGRES_URL
from tests.stopping import send, wait_gone

pytestmark = [pytest.mark.e2e, pytest.mark.faults]

ROOT = Path(__file__).resolve().parent.parent
INNER = "tests/faults/run_until_stopped.py"
STARTS_IN = 120  # seconds for the inner run to hold everything (initdb, three serve processes)
STOPS_IN = 60  # seconds for it to end once stopped: its finalizers are bounded well within this
INTERRUPTED = 2  # pytest's exit status when interrupted (KeyboardInterrupt)


@contextmanager
def inner_run(tmp_path: Path, test: str) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    """The inner pytest, in a session of its own as a terminal's job (so that its process group can
    be signalled as Ctrl-C does), its TMPDIR ours to look into. Killed with its group if the test
    leaves it running."""
    # Not under tmp_path: as root the cluster runs as `postgres`, which may pass through this
    # folder but not pytest's (0700).
    temp = Path(tempfile.mkdtemp(prefix="sq-stopped-run-"))
    temp.chmod(0o711)
    env = {
        **os.environ,
        "SIMPLEQUEUE_TEST_HELD": str(tmp_path / "held.json"),
        "TMPDIR": str(temp),
    }
    command = [sys.executable, "-m", "pytest", "-q", "-x", "-rs", "-p", "no:cacheprovider", "--basetemp"]
    with (tmp_path / "inner.log").open("wb") as log:
        run = subprocess.Popen(
            [*command, str(tmp_path / "base"), f"{INNER}::{test}"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        yield run, temp
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
        end_what_it_left(tmp_path / "held.json")
        shutil.rmtree(temp, ignore_errors=True)


def end_what_it_left(held_file: Path) -> None:
    """Whatever the inner run left (when this test fails), ended here: its processes, by pid, and
    its database; so that the next test starts clean."""
    if not held_file.exists():
        return
    held = json.loads(held_file.read_text())
    left = [int(p.split()[0]) for p in still_running(held)]
    send(left, signal.SIGKILL)
    wait_gone(left, 10)
    if held.get("database") and databases_named(held["database"]):
        drop_database(held["database"])


def held_by(run: subprocess.Popen[bytes], tmp_path: Path) -> dict[str, Any]:
    """What the inner run holds, once it says so (or why it never did)."""
    held = tmp_path / "held.json"
    deadline = time.monotonic() + STARTS_IN
    while not held.exists():
        if run.poll() is not None:
            said = (tmp_path / "inner.log").read_text(errors="replace")
            if " skipped" in said and os.environ.get("CI", "").lower() != "true":
                pytest.skip(f"the inner run could not hold everything: {said[-500:]}")
            pytest.fail(f"the inner run ended ({run.returncode}) before it held everything:\n{said[-3000:]}")
        assert time.monotonic() < deadline, f"the inner run held nothing within {STARTS_IN} s"
        time.sleep(0.05)
    found: dict[str, Any] = json.loads(held.read_text())
    return found


def still_running(held: dict[str, Any]) -> list[str]:
    """The held processes that still run (a pid with the start time it had then: not a new one)."""
    running = []
    for pid, started in held["processes"].items():
        try:
            stat = (Path("/proc") / pid / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if stat[19] == started and stat[0] != "Z":
            running.append(f"{pid} {(Path('/proc') / pid / 'comm').read_text().strip()}")
    return running


def databases_named(name: str) -> int:
    import asyncpg

    async def count() -> int:
        conn = await asyncpg.connect(POSTGRES_URL, timeout=5)
        try:
            found: int = await conn.fetchval("SELECT count(*) FROM pg_database WHERE datname = $1", name)
            return found
        finally:
            await conn.close()

    return asyncio.run(count())


def drop_database(name: str) -> None:
    import asyncpg

    async def drop() -> None:
        conn = await asyncpg.connect(POSTGRES_URL, timeout=5)
        try:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await conn.close()

    asyncio.run(drop())


def stopped_in_time(run: subprocess.Popen[bytes]) -> int:
    try:
        return run.wait(timeout=STOPS_IN)
    except subprocess.TimeoutExpired:
        pytest.fail(f"pytest did not stop within {STOPS_IN} s")


def assert_nothing_left(held: dict[str, Any], temp: Path) -> None:
    assert still_running(held) == []
    assert databases_named(held["database"]) == 0, "the test database is still on the shared server"
    assert list(temp.iterdir()) == [], "a folder of the run is still there"


def ctrl_c_twice(run: subprocess.Popen[bytes], tmp_path: Path) -> None:
    """Ctrl-C, and Ctrl-C again once the finalizers have begun (the first seemed to do nothing)."""
    os.killpg(run.pid, signal.SIGINT)
    tearing_down = tmp_path / "held.json.teardown"
    deadline = time.monotonic() + STOPS_IN
    while not tearing_down.exists() and run.poll() is None:
        assert time.monotonic() < deadline, "the finalizers never began"
        time.sleep(0.02)
    if run.poll() is None:
        os.killpg(run.pid, signal.SIGINT)


def sigterm(run: subprocess.Popen[bytes], tmp_path: Path) -> None:
    """As a supervisor (CI, systemd, a container's stop) stops it; SIGHUP takes the same path."""
    run.send_signal(signal.SIGTERM)


@pytest.mark.parametrize("stop", [ctrl_c_twice, sigterm])
def test_a_stopped_run_ends_its_processes_drops_its_database_and_removes_its_folder(
    stop: Callable[[subprocess.Popen[bytes], Path], None], tmp_path: Path
) -> None:
    with inner_run(tmp_path, "test_holds_processes_a_database_and_a_folder_until_stopped") as (run, temp):
        held = held_by(run, tmp_path)
        stop(run, tmp_path)
        assert stopped_in_time(run) == INTERRUPTED
        assert_nothing_left(held, temp)
    if stop is ctrl_c_twice:  # the second came while the finalizers ran, and left them be
        assert "SIGINT: still stopping what the tests started" in (tmp_path / "inner.log").read_text()


def test_a_run_that_fails_under_x_ends_even_a_process_no_finalizer_stops(tmp_path: Path) -> None:
    with inner_run(tmp_path, "test_leaves_a_process_that_no_finalizer_stops_and_fails") as (run, _):
        held = held_by(run, tmp_path)
        assert stopped_in_time(run) == 1  # tests failed
        assert still_running(held) == []
    assert "stopping 1 processes the tests left running: sleep" in (tmp_path / "inner.log").read_text()
