"""`simplequeue schedule ...` against a real `serve` on SQLite (its scheduler running), in process:
each command prints the service's answer as JSON, each failure one line."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner
from simplequeue.cli import main

from tests.test_e2e import serving

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serving(f"sqlite:///{tmp_path_factory.mktemp('schedules') / 'schedules.db'}") as base:
        yield base


def test_the_cli_puts_fires_and_deletes_a_schedule(url: str) -> None:
    runner = CliRunner()

    def run(*args: str) -> Any:
        done = runner.invoke(main, [*args], env={"SIMPLEQUEUE_URL": url}, catch_exceptions=False)
        assert done.exit_code == 0, done.output
        return json.loads(done.output)

    made = run("schedule", "put", "cli-tick", '{"tick": true}', "--queue", "cli-ticks", "--every", "1")
    assert (made["every_seconds"], made["queue"]) == (1, "cli-ticks")
    assert [s["name"] for s in run("schedule", "list")] == ["cli-tick"]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and run("schedule", "show", "cli-tick")["last_item_id"] is None:
        time.sleep(0.2)  # the served scheduler fires each second's slot
    assert run("schedule", "show", "cli-tick")["last_item_id"] is not None
    assert run("schedule", "pause", "cli-tick")["paused"] is True
    assert run("schedule", "trigger", "cli-tick")["last_run_at"] is not None
    assert run("schedule", "resume", "cli-tick")["paused"] is False
    assert run("schedule", "delete", "cli-tick") == {"deleted": "cli-tick"}
    missing = runner.invoke(main, ["schedule", "show", "cli-tick"], env={"SIMPLEQUEUE_URL": url})
    assert missing.exit_code == 1
    [line] = missing.output.strip().splitlines()
    assert "ScheduleNotFound" in line or "no schedule" in line.lower(), line
    bad = runner.invoke(
        main,
        ["schedule", "put", "x", "1", "--queue", "q", "--cron", "61 * * * *"],
        env={"SIMPLEQUEUE_URL": url},
    )
    assert bad.exit_code == 1
    assert "cron" in bad.output, bad.output
