"""A strict TypeScript caller generated from the committed spec works against a live server.

In clients/typescript (its package-lock.json pins every tool): `npm ci` once, then `redocly lint`
(the recommended rules) on openapi/openapi.json, openapi-typescript from it into generated/ (not
committed), `tsc --strict` over push_pop.ts, and the compiled program run with node against a real
`simplequeue serve`. The program pushes with only `payload`, pops with only `queue`, completes, and
switches on a typed error code: generated types that made a defaulted field required, or named a
shape the service does not answer, fail here. Without npm the tests are skipped, except under CI.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.installs import npm_ci
from tests.test_e2e import serving

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).parent.parent
CLIENT = ROOT / "clients" / "typescript"
SPEC = ROOT / "openapi" / "openapi.json"


def run(*command: str, timeout: float = 300) -> str:
    done = subprocess.run(command, cwd=CLIENT, capture_output=True, text=True, timeout=timeout, check=False)
    assert done.returncode == 0, f"{' '.join(command)} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout + done.stderr


@pytest.fixture(scope="module")
def tools() -> Path:
    """clients/typescript/node_modules/.bin, installed by `npm ci` once per package-lock.json."""
    if shutil.which("npm") is None or shutil.which("node") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI needs node and npm for the TypeScript client check")
        pytest.skip("node and npm are not installed")
    npm_ci(CLIENT)
    return CLIENT / "node_modules" / ".bin"


def test_redocly_recommended_rules_pass(tools: Path) -> None:
    out = run(str(tools / "redocly"), "lint", "--extends=recommended", "--format=stylish", str(SPEC))
    assert " error " not in out, out
    assert " warning " not in out, out


def test_strict_typescript_client_pushes_pops_completes_and_reads_errors(tools: Path, tmp_path: Path) -> None:
    shutil.rmtree(CLIENT / "generated", ignore_errors=True)
    shutil.rmtree(CLIENT / "dist", ignore_errors=True)
    run(str(tools / "openapi-typescript"), str(SPEC), "--output", "generated/schema.d.ts")
    run(str(tools / "tsc"), "--strict", "-p", "tsconfig.json")
    with serving(f"sqlite:///{tmp_path / 'ts.db'}") as base:
        out = run("node", "dist/push_pop.js", base, timeout=60)
    assert out.startswith("ok: pushed, popped and completed"), out
    assert "ItemNotFound" in out
