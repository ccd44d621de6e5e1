"""The release notes of a tag: its section of CHANGELOG.md, printed; refused (exit 1, one line) when
the tag is not pyproject.toml's version or the changelog has no dated section for it.

    python scripts/release_notes.py v0.3.0 > release-notes.md
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def notes(tag: str, changelog: str, version: str) -> str:
    """The section's text, without its heading; ValueError saying what is wrong."""
    if tag != f"v{version}":
        raise ValueError(f"the tag {tag} is not v{version}, pyproject.toml's version")
    heading = re.compile(rf"^## \[{re.escape(version)}\] - \d{{4}}-\d{{2}}-\d{{2}}$", re.M)
    found = heading.search(changelog)
    if found is None:
        raise ValueError(f"CHANGELOG.md has no dated section '## [{version}] - YYYY-MM-DD'")
    following = re.compile(r"^## \[", re.M).search(changelog, found.end())
    body = changelog[found.end() : following.start() if following else len(changelog)]
    return body.strip() + "\n"


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: release_notes.py vX.Y.Z", file=sys.stderr)
        return 2
    version = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    try:
        print(notes(sys.argv[1], (ROOT / "CHANGELOG.md").read_text(encoding="utf-8"), version), end="")
    except ValueError as exc:
        print(f"release_notes: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
