"""CHANGELOG.md against the repository: its versions are pyproject's, its releases are dated, each
section names the schema version of every engine (Unreleased's: the migrations here now), and
docs/upgrading.md speaks of every released version."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHANGELOG = ROOT / "CHANGELOG.md"
UPGRADING = ROOT / "docs" / "upgrading.md"

UNRELEASED = "Unreleased"
HEADING = re.compile(r"^## \[(?P<version>[^\]]+)\](?: - (?P<date>\S+))?[ \t]*$", re.MULTILINE)
SCHEMA_LINE = re.compile(r"^Schema: (?P<text>.+)$", re.MULTILINE)
ENGINES = {"SQLite": "sqlite", "PostgreSQL": "postgresql", "SQL Server": "mssql"}
"""The changelog's name of each engine, and its folder under migrations/."""


@dataclass(frozen=True)
class Section:
    version: str
    date: str | None
    body: str


def sections() -> list[Section]:
    text = CHANGELOG.read_text(encoding="utf-8")
    found = list(HEADING.finditer(text))
    ends = [m.start() for m in found[1:]] + [len(text)]
    return [Section(m["version"], m["date"], text[m.end() : end]) for m, end in zip(found, ends, strict=True)]


def released() -> list[Section]:
    return [s for s in sections() if s.version != UNRELEASED]


def pyproject_version() -> str:
    with (ROOT / "pyproject.toml").open("rb") as file:
        version: str = tomllib.load(file)["project"]["version"]
    return version


def schema_versions(section: Section) -> dict[str, int | None]:
    """The section's `Schema:` line, read as {engine: version}; None where it says `none`."""
    [line] = SCHEMA_LINE.findall(section.body)
    versions: dict[str, int | None] = {}
    for engine in ENGINES:
        match = re.search(rf"\b{engine} (\d+|none)\b", line)
        assert match, f"[{section.version}]: no schema version for {engine} in {line!r}"
        versions[engine] = None if match[1] == "none" else int(match[1])
    return versions


def latest_migration(folder: str) -> int:
    return max(
        int(path.name[:4]) for path in (ROOT / "migrations" / folder).glob("[0-9][0-9][0-9][0-9]_*.sql")
    )


def test_the_first_release_is_pyprojects_version() -> None:
    found = sections()
    assert found, "CHANGELOG.md has no version headings"
    first = found[1] if found[0].version == UNRELEASED else found[0]
    assert first.version == pyproject_version()


def test_only_unreleased_is_undated_and_releases_have_iso_dates() -> None:
    for section in sections():
        if section.version == UNRELEASED:
            assert section.date is None, "Unreleased has no date"
            continue
        assert re.fullmatch(r"\d+\.\d+\.\d+", section.version), section.version
        assert section.date is not None, f"[{section.version}] has no date"
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", section.date), section.date
        date.fromisoformat(section.date)


def test_releases_run_newest_first() -> None:
    versions = [tuple(int(part) for part in s.version.split(".")) for s in released()]
    dates = [s.date or "" for s in released()]
    assert versions == sorted(versions, reverse=True)
    assert dates == sorted(dates, reverse=True)


def test_every_section_names_each_engines_schema() -> None:
    for section in sections():
        versions = schema_versions(section)
        if section.version == UNRELEASED:
            assert versions == {engine: latest_migration(folder) for engine, folder in ENGINES.items()}
        else:
            assert any(v is not None for v in versions.values()), section.version


def test_the_upgrade_guide_mentions_every_released_version() -> None:
    guide = UPGRADING.read_text(encoding="utf-8")
    for section in released():
        assert section.version in guide, f"docs/upgrading.md does not mention {section.version}"
