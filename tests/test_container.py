"""What can be checked of the container without a Docker engine: hadolint passes the Dockerfile,
and `simplequeue probe`, the image's HEALTHCHECK, tells ready from not."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_e2e import free_port, serving, simplequeue_command

ROOT = Path(__file__).parent.parent


def test_hadolint_passes_the_dockerfile() -> None:
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    done = subprocess.run([hadolint, "--no-color", "Dockerfile"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == ""


def probe(port: int, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*simplequeue_command(), "probe", *args],
        capture_output=True,
        text=True,
        timeout=30,
        env={"PATH": os.environ["PATH"], "SIMPLEQUEUE_PORT": str(port)},
    )


@pytest.mark.e2e
def test_probe_says_ready_or_not(tmp_path: Path) -> None:
    database = f"sqlite:///{tmp_path / 'probe.db'}"
    with serving(database) as base:
        port = int(base.rsplit(":", 1)[1])
        ready = probe(port, "--ready")
        assert (ready.returncode, ready.stdout.strip()) == (0, '{"status":"ready"}'), ready.stderr
        assert probe(port).returncode == 0
    nobody = free_port()
    down = probe(nobody, "--ready")
    assert down.returncode == 1
    [line] = down.stderr.strip().splitlines()
    assert f"http://127.0.0.1:{nobody}/readyz" in line
