"""Tools the suite installs for itself, installed once and kept while what pins them is unchanged:
node_modules for a package-lock.json, and a virtualenv for a list of pip requirements."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent


def npm_ci(directory: Path, *, timeout: float = 300) -> None:
    """`npm ci` in `directory`, unless its node_modules is what its package-lock.json pins for this
    node: the stamp is written after a complete install, and `npm ci` deletes node_modules (and the
    stamp with it) before it installs."""
    node = subprocess.run(["node", "--version"], capture_output=True, text=True, check=True).stdout
    lock = (directory / "package-lock.json").read_bytes()
    want = hashlib.sha256(lock + node.encode()).hexdigest()
    stamp = directory / "node_modules" / ".simplequeue-lock-sha256"
    if stamp.exists() and stamp.read_text() == want:
        return
    command = ["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"]
    done = subprocess.run(
        command, cwd=directory, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, f"{' '.join(command)} failed:\n{done.stdout}\n{done.stderr}"
    stamp.write_text(want)


def pip_venv(name: str, requirements: list[str], *, timeout: float = 300) -> tuple[Path, str]:
    """A virtualenv with `requirements` (and nothing of this project), made once under the project's
    root as .venv-{name}-{digest of the requirements and this Python}, and its python. Built aside
    and renamed into place when complete, so that a build cut short (or one another run of the suite
    makes at the same time) is never taken for a finished one. Returns its python, and "" or why it
    could not be built."""
    digest = hashlib.sha256("\n".join([sys.version, *requirements]).encode()).hexdigest()[:12]
    venv = ROOT / f".venv-{name}-{digest}"
    python = venv / "bin" / "python"
    if python.exists():
        return python, ""
    building = ROOT / f".venv-{name}-{digest}.building-{os.getpid()}"
    shutil.rmtree(building, ignore_errors=True)
    try:
        built = subprocess.run([sys.executable, "-m", "venv", str(building)], capture_output=True, text=True)
        if built.returncode == 0:
            python_in = str(building / "bin" / "python")
            pip = [python_in, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
            built = subprocess.run([*pip, *requirements], capture_output=True, text=True, timeout=timeout)
        if built.returncode != 0:
            return python, f"cannot install {' '.join(requirements)}: {built.stderr[-500:]}"
        try:
            building.rename(venv)
        except OSError:  # another run finished the same venv first: take that one
            if not python.exists():
                raise
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return python, ""
