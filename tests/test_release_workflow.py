"""The release workflow (.github/workflows/release.yml), checked for shape: no runner runs here. A
`v*` tag runs the suite and builds; only both passing publishes; PyPI by trusted publishing (an
OIDC token, no password); the image for amd64 and arm64 on GHCR; a GitHub release with the
artefacts and the changelog's section, which scripts/release_notes.py takes (tested here)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from release_notes import notes  # noqa: E402 (a script, not a package)

CHANGELOG = (
    "# Changelog\n\n## [Unreleased]\n\n- next\n\n"
    "## [1.2.0] - 2026-12-01\n\n### Added\n\n- x\n\n"
    "## [1.1.0] - 2026-11-01\n\n- y\n"
)


def workflow() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ROOT / ".github" / "workflows" / "release.yml").read_text())
    return loaded


def steps(job: dict[str, Any]) -> list[str]:
    return [s.get("uses", "") or s.get("run", "") for s in job["steps"]]


def test_a_v_tag_runs_the_suite_and_builds_before_anything_is_published() -> None:
    flow = workflow()
    assert flow[True]["push"]["tags"] == ["v*"]  # YAML reads the key `on` as true
    assert flow["permissions"] == {"contents": "read"}
    jobs = flow["jobs"]
    assert any("bash .ci/run" in s for s in steps(jobs["suite"]))
    assert set(jobs["pypi"]["needs"]) == {"suite", "build"}
    assert set(jobs["image"]["needs"]) == {"suite", "build"}
    assert set(jobs["release"]["needs"]) == {"pypi", "image"}
    build = steps(jobs["build"])
    assert any("scripts/release_notes.py" in s for s in build)
    assert any("twine check --strict" in s for s in build)


def test_pypi_by_trusted_publishing_and_the_image_for_two_architectures() -> None:
    jobs = workflow()["jobs"]
    pypi = jobs["pypi"]
    assert pypi["permissions"] == {"id-token": "write"}
    [publish] = [s for s in pypi["steps"] if s.get("uses", "").startswith("pypa/gh-action-pypi-publish@")]
    assert not {"password", "user"} & set(publish.get("with", {}))  # OIDC, not a token
    image = jobs["image"]
    [push] = [s for s in image["steps"] if s.get("uses", "").startswith("docker/build-push-action@")]
    assert set(push["with"]["platforms"].split(",")) == {"linux/amd64", "linux/arm64"}
    assert push["with"]["push"] is True
    [meta] = [s for s in image["steps"] if s.get("uses", "").startswith("docker/metadata-action@")]
    assert meta["with"]["images"].startswith("ghcr.io/")
    assert image["permissions"]["packages"] == "write"
    release = jobs["release"]
    [made] = [s for s in release["steps"] if s.get("uses", "").startswith("softprops/action-gh-release@")]
    assert made["with"]["body_path"] == "release-notes.md"
    assert release["permissions"] == {"contents": "write"}


def test_the_notes_are_the_tag_s_section() -> None:
    assert notes("v1.2.0", CHANGELOG, "1.2.0") == "### Added\n\n- x\n"
    assert notes("v1.1.0", CHANGELOG, "1.1.0") == "- y\n"
    with pytest.raises(ValueError, match=r"not v1\.2\.0"):
        notes("v1.2.1", CHANGELOG, "1.2.0")
    with pytest.raises(ValueError, match="no dated section"):
        notes("v1.3.0", CHANGELOG, "1.3.0")


def test_this_release_s_notes_or_why_not_in_one_line() -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "release_notes.py"), f"v{version}"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Schema: ")
    wrong = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "release_notes.py"), "v99.0.0"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert wrong.returncode == 1
    [line] = wrong.stderr.strip().splitlines()
    assert "is not v" in line
