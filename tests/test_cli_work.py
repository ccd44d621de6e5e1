"""`simplequeue work -- CMD` as a person runs it: the console script against a real serve, real
child processes, real signals. Commands wait on files the test creates, so nothing depends on
timing: each step waits for the state it needs (bounded)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from simplequeue.client import Client

from tests.test_e2e import serving, simplequeue_command

pytestmark = pytest.mark.e2e

UNTIL = 30.0  # seconds any single wait below may take before the test fails


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serving(f"sqlite:///{tmp_path_factory.mktemp('work') / 'work.db'}") as base:
        yield base


@pytest.fixture
def sq(url: str) -> Iterator[Client]:
    with Client(url) as client:
        yield client


def env_for(url: str) -> dict[str, str]:
    return {"SIMPLEQUEUE_URL": url, "PATH": os.environ["PATH"]}


def work(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*simplequeue_command(), "work", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env_for(url),
    )


def start_work(url: str, *args: str, cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*simplequeue_command(), "work", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        env=env_for(url),
    )


def wait_for(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + UNTIL
    while not check():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.05)


def py(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_exit_0_completes_and_non_zero_fails_with_the_stderr_tail(url: str, sq: Client) -> None:
    sq.put_queue("w-fail", max_attempts=1)
    ok = sq.push({"n": 1, "word": "héllo"}, queue="w-fail")
    bad = sq.push({"n": 2}, queue="w-fail")
    script = (
        "import json, os, sys\n"
        "item = json.load(sys.stdin)\n"
        "print(os.environ['SIMPLEQUEUE_ITEM_ID'], os.environ['SIMPLEQUEUE_ATTEMPT'], item['n'])\n"
        "if item['n'] == 2:\n"
        "    sys.stderr.write('x' * 100000 + '\\nthe last line says why\\n')\n"
        "    sys.exit(7)\n"
    )
    done = work(url, "--queue", "w-fail", "--exit-when-empty", "--", *py(script))

    assert done.returncode == 5, done.stderr  # a command failed
    assert sorted(done.stdout.splitlines()) == sorted([f"{ok.id} 1 1", f"{bad.id} 1 2"])
    assert done.stderr.strip().splitlines()[-1] == "simplequeue work: 1 succeeded, 1 failed, 1 of them dead"
    [dead] = sq.dead("w-fail").items
    assert dead.id == bad.id
    error = dead.errors[-1].error
    assert error.startswith("exit status 7: …xxx")
    assert error.endswith("xxx\nthe last line says why")
    assert len(error) == 4000
    assert sq.stats("w-fail").completed_in_history == 1


def test_the_error_names_the_exit_status_and_an_empty_stderr(url: str, sq: Client) -> None:
    sq.put_queue("w-status", max_attempts=1)
    item = sq.push({}, queue="w-status")
    done = work(url, "-q", "w-status", "--exit-when-empty", "--", "sh", "-c", "exit 3")
    assert done.returncode == 5, done.stderr
    assert sq.get_item(item.id).errors[-1].error == "exit status 3 (nothing on stderr)"


def test_concurrency_runs_commands_side_by_side(url: str, sq: Client, tmp_path: Path) -> None:
    # Each command waits until both have started: with --concurrency 1 this would never end.
    sq.push_batch([{"payload": n} for n in range(2)], queue="w-pair")
    script = (
        "import os, pathlib, sys, time\n"
        "pathlib.Path(os.environ['SIMPLEQUEUE_ITEM_ID']).touch()\n"
        "deadline = time.monotonic() + 30\n"
        "while len(os.listdir('.')) < 2 and time.monotonic() < deadline: time.sleep(0.02)\n"
        "sys.exit(0 if len(os.listdir('.')) >= 2 else 1)\n"
    )
    process = start_work(url, "-q", "w-pair", "-c", "2", "--exit-when-empty", "--", *py(script), cwd=tmp_path)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 0, stderr
    assert stderr.strip().splitlines()[-1] == "simplequeue work: 2 succeeded, 0 failed"


def test_sigterm_stops_popping_and_lets_the_running_command_finish(
    url: str, sq: Client, tmp_path: Path
) -> None:
    pushed = sq.push_batch([{"payload": n} for n in range(3)], queue="w-term")
    blocked = "touch started; while [ ! -e go ]; do sleep 0.02; done; cat"
    process = start_work(url, "-q", "w-term", "--", "sh", "-c", blocked, cwd=tmp_path)
    try:
        wait_for((tmp_path / "started").exists, "the first command to start")
        process.send_signal(signal.SIGTERM)
        assert process.stderr is not None
        line = process.stderr.readline()
        assert "SIGTERM: no more pops; waiting for 1 running command(s)" in line
        (tmp_path / "go").touch()
        stdout, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
        process.communicate(timeout=30)  # reaped: a failed test leaves no process to warn of later
    assert process.returncode == 0, stderr
    assert stdout == "0\n"  # the first item's payload, and no other item ran
    assert stderr.strip().splitlines()[-1] == "simplequeue work: 1 succeeded, 0 failed"
    assert sq.get_item(pushed.ids[1]).status == "ready"
    stats = sq.stats("w-term")
    assert (stats.completed_in_history, stats.ready, stats.leased) == (1, 2, 0)


def test_a_second_signal_terminates_the_running_commands(url: str, sq: Client, tmp_path: Path) -> None:
    item = sq.push({}, queue="w-twice")
    forever = "touch started; while true; do sleep 0.02; done"
    process = start_work(url, "-q", "w-twice", "--", "sh", "-c", forever, cwd=tmp_path)
    try:
        wait_for((tmp_path / "started").exists, "the command to start")
        process.send_signal(signal.SIGINT)
        assert process.stderr is not None
        assert "SIGINT: no more pops" in process.stderr.readline()
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
        process.communicate(timeout=30)  # reaped: a failed test leaves no process to warn of later
    assert process.returncode == 5, stderr  # its command failed: killed
    assert "SIGINT: terminating 1 running command(s)" in stderr
    assert stderr.strip().splitlines()[-1] == "simplequeue work: 0 succeeded, 1 failed"  # retried later
    found = sq.get_item(item.id)
    assert found.status in {"retrying", "ready"}
    assert found.errors[-1].error == "killed by SIGTERM (nothing on stderr)"


@pytest.mark.parametrize(
    ("args", "says", "status"),
    [
        (["-q", "w-x", "--", "no-such-command-here"], "command not found: no-such-command-here", 1),
        (["-q", "has space", "--", "true"], "ValidationError", 1),
        (["-q", "w-x"], "Missing argument 'COMMAND...'", 2),
    ],
)
def test_bad_input_is_one_line(url: str, args: list[str], says: str, status: int) -> None:
    done = work(url, *args)
    assert done.returncode == status, done
    assert says in done.stderr
    assert "Traceback" not in done.stderr


def test_an_unreachable_url_is_one_line_naming_it_within_seconds() -> None:
    dead = "http://127.0.0.1:9"  # discard: nothing listens
    started = time.monotonic()
    done = work(dead, "-q", "w", "--", "true")
    assert done.returncode == 4, done
    [line] = done.stderr.strip().splitlines()
    assert dead in line
    assert time.monotonic() - started < 30


def test_all_succeeded_is_exit_0_and_a_retried_failure_is_exit_5(
    url: str, sq: Client, tmp_path: Path
) -> None:
    # A failed item waits an hour before its retry: this run will not see it again.
    sq.put_queue("w-codes", backoff={"base_seconds": 3600, "cap_seconds": 3600, "jitter": 0})
    sq.push_batch([{"payload": n} for n in range(3)], queue="w-codes")
    done = work(url, "-q", "w-codes", "--exit-when-empty", "--", "cat")
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "simplequeue work: 3 succeeded, 0 failed"
    item = sq.push({}, queue="w-codes")
    done = work(url, "-q", "w-codes", "--exit-when-empty", "--", "false")
    assert done.returncode == 5, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "simplequeue work: 0 succeeded, 1 failed"
    assert sq.get_item(item.id).status == "retrying"


def test_a_queue_nothing_was_pushed_to_with_exit_when_empty_is_exit_6(url: str) -> None:
    done = work(url, "-q", "w-never", "--exit-when-empty", "--", "true")
    assert (done.returncode, done.stdout) == (6, ""), done
    [line] = done.stderr.strip().splitlines()
    assert line == "Error: queue 'w-never' does not exist (nothing was ever pushed to it)"


def test_a_queue_nothing_was_pushed_to_is_said_once_and_waited_on(
    url: str, sq: Client, tmp_path: Path
) -> None:
    process = start_work(url, "-q", "w-later", "--", "sh", "-c", "cat > done", cwd=tmp_path)
    try:
        assert process.stderr is not None
        said = process.stderr.readline()
        assert said == (
            "simplequeue work: queue 'w-later' does not exist (nothing was ever pushed to it); "
            "waiting for its first item\n"
        )
        sq.push({"first": True}, queue="w-later")
        wait_for(
            lambda: (tmp_path / "done").exists() and sq.stats("w-later").completed_in_history == 1, "the item"
        )
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
        process.communicate(timeout=30)  # reaped: a failed test leaves no process to warn of later
    assert process.returncode == 0, stderr
    assert (tmp_path / "done").read_text() == '{"first": true}\n'
    assert stderr.strip().splitlines()[-1] == "simplequeue work: 1 succeeded, 0 failed"
