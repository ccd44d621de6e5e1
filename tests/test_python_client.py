"""A strict Python caller through the client openapi-python-client generates from the committed spec
works against a live server.

The tools (clients/python/requirements.txt pins them) live in their own virtualenv,
clients/python/.venv, made once and remade when the pins change: the generator pins its own httpx
and attrs ranges, which must not decide ours. The steps are docs/clients.md's: generate into
clients/python/generated (not committed; generated in CI from the spec, which the drift test ties
to the code), `pip install` it, `mypy --strict` over push_pop.py, and push_pop.py run against a real
`simplequeue serve`: it pushes with only `payload`, pops with only `queue`, completes, and checks a
typed error code. A generator warning fails the test.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_e2e import serving

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).parent.parent
CLIENT = ROOT / "clients" / "python"
SPEC = ROOT / "openapi" / "openapi.json"
VENV = CLIENT / ".venv"


def run(*command: str | Path, timeout: float = 600) -> str:
    env = {**os.environ, "PATH": f"{VENV / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    env.pop("VIRTUAL_ENV", None)
    done = subprocess.run(
        [str(part) for part in command],
        cwd=CLIENT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, f"{' '.join(map(str, command))} failed:\n{out}"
    return out


@pytest.fixture(scope="module")
def tools() -> Path:
    """clients/python/.venv/bin with the pinned generator and mypy."""
    pins = (CLIENT / "requirements.txt").read_bytes()
    stamp = VENV / ".requirements-sha256"
    want = hashlib.sha256(pins).hexdigest()
    if not stamp.exists() or stamp.read_text() != want:
        shutil.rmtree(VENV, ignore_errors=True)
        run(sys.executable, "-m", "venv", VENV)
        run(VENV / "bin" / "python", "-m", "pip", "install", "-q", "--disable-pip-version-check", "-r",
            "requirements.txt")  # fmt: skip
        stamp.write_text(want)
    return VENV / "bin"


@pytest.fixture(scope="module")
def generated(tools: Path) -> str:
    shutil.rmtree(CLIENT / "generated", ignore_errors=True)
    out = run(
        tools / "openapi-python-client",
        "generate",
        "--path",
        SPEC,
        "--config",
        "config.yaml",
        "--output-path",
        "generated",
    )
    run(tools / "python", "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
        "--force-reinstall", "./generated")  # fmt: skip
    return out


def test_the_generator_warns_of_nothing(generated: str) -> None:
    assert "warning" not in generated.lower(), generated


def test_the_generated_package_is_named_apart_from_the_sdk(generated: str) -> None:
    package = CLIENT / "generated" / "simplequeue_openapi"
    assert (package / "py.typed").exists()
    codes = (package / "models" / "error_code.py").read_text()
    assert 'ITEM_NOT_FOUND = "ItemNotFound"' in codes  # x-enum-varnames: names as the server's


def test_strict_python_client_pushes_pops_completes_and_reads_errors(
    tools: Path, generated: str, tmp_path: Path
) -> None:
    run(tools / "mypy", "--strict", "--no-incremental", "push_pop.py")
    with serving(f"sqlite:///{tmp_path / 'py.db'}") as base:
        out = run(tools / "python", "push_pop.py", base, timeout=60)
    assert out.startswith("ok: pushed, popped and completed"), out
    assert "then ItemNotFound; then body.max_items invalid" in out
