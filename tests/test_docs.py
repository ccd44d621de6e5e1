"""The documentation's runnable blocks, run as a reader would: in order, against a live service.

A fenced block right after the line `<!-- run -->` is run. The shell blocks of a page run as one
bash script (`set -euo pipefail`), so a variable one block captures (an id, a lease token) is
there for the next; each Python block runs on its own and must pass `mypy --strict` first. Every
page gets a fresh `simplequeue serve` on SQLite, and the service's address in the text
(127.0.0.1:8000, localhost:8000) is replaced by that service's. The site itself must build with
`mkdocs build --strict` (broken links and missing pages fail it).

On the pages of SHOWS_OUTPUTS, a one-line command whose comment is one word without spaces
(`curl … -X DELETE "$BASE/queues/mail/dead"   # {"purged":1}`) shows what the command prints, and
the run must print that (`…` in it stands for anything). A comment with spaces is prose.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.test_e2e import serving

ROOT = Path(__file__).resolve().parent.parent
PAGES = [
    "README.md",
    "docs/getting-started.md",
    "docs/api.md",
    "docs/clients.md",
    "docs/outbox.md",
    "docs/sqs.md",
    "docs/sns.md",
    "docs/flow-control.md",
    "docs/schedules.md",
]
# Pages whose blocks also use a database of their own, as an application does: DATABASE_URL names a
# migrated PostgreSQL database, and SIMPLEQUEUE_DATABASE_URL the page's service's SQLite file.
ON_DATABASES = {"docs/outbox.md"}
# What a page's service is started with, as the page says.
SERVED_WITH = {"docs/sns.md": {"SIMPLEQUEUE_SNS_ENDPOINTS": "127.0.0.1/32"}}
BLOCK = re.compile(r"^<!-- run -->\n```(\w+)\n(.*?)^```$", re.M | re.S)
ADDRESS = re.compile(r"(127\.0\.0\.1|localhost):8000")
SHOWS_OUTPUTS = {"docs/api.md", "docs/clients.md"}
SHOWN = re.compile(r"^(?P<command>\S.*?)\s+# (?P<shown>\S+)$")
PRINTED = re.compile(r"^@@shown (\d+)\n(.*?)^@@end$", re.M | re.S)
RUNS_IN = 120  # seconds a page's blocks may take in all (a long-poll is at most a few seconds)

pytestmark = pytest.mark.e2e


@dataclass(frozen=True)
class Block:
    language: str
    text: str
    line: int


def blocks(page: str) -> list[Block]:
    text = (ROOT / page).read_text(encoding="utf-8")
    return [Block(m[1], m[2], text.count("\n", 0, m.start()) + 2) for m in BLOCK.finditer(text)]


def test_every_page_marks_what_runs() -> None:
    for page in PAGES:
        found = blocks(page)
        assert found, f"{page} has no runnable block"
        assert {b.language for b in found} <= {"sh", "python"}, page


@pytest.mark.parametrize("page", PAGES)
def test_the_blocks_of_a_page_run_in_order_against_a_live_service(
    page: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    missing = [tool for tool in ("bash", "curl", "jq") if shutil.which(tool) is None]
    if missing:  # scripts/test installs them; under CI their absence fails rather than skips
        message = f"the documentation's shell blocks need {', '.join(missing)}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    found = blocks(page)
    database_url = f"sqlite:///{tmp_path / 'docs.db'}"
    databases = {}
    if page in ON_DATABASES:
        databases = {"SIMPLEQUEUE_DATABASE_URL": database_url, "DATABASE_URL": _migrated_postgres(request)}
    with serving(database_url, env=SERVED_WITH.get(page)) as base:
        address = base.removeprefix("http://")
        env = {
            **os.environ,
            **databases,
            "SIMPLEQUEUE_URL": base,
            "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
        }
        shell = [b for b in found if b.language == "sh"]
        if shell:
            shown: dict[int, str] = {}
            texts = [ADDRESS.sub(address, b.text) for b in shell]
            if page in SHOWS_OUTPUTS:
                texts = [checking(text, b.line, shown) for text, b in zip(texts, shell, strict=True)]
            script = "set -euo pipefail\n" + "\n".join(
                f"echo '--- {page}:{b.line}' >&2\n{text}" for text, b in zip(texts, shell, strict=True)
            )
            ran = subprocess.run(
                ["bash", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=RUNS_IN
            )
            where = ran.stderr.rsplit("--- ", 1)[-1].splitlines()[0] if "--- " in ran.stderr else page
            assert ran.returncode == 0, f"{where} failed:\n{ran.stdout[-2000:]}\n{ran.stderr[-2000:]}"
            wrong = misprinted(ran.stdout, shown, page)
            assert not wrong, "\n".join(wrong)
        python = [b for b in found if b.language == "python"]
        sources = [tmp_path / f"block_{number}.py" for number in range(len(python))]
        for source, block in zip(sources, python, strict=True):
            source.write_text(ADDRESS.sub(address, block.text), encoding="utf-8")
        if python:
            # One mypy run checks every block (each its own module, as if run alone): a run spends
            # most of its time loading the libraries' types, the same for every block.
            typed = subprocess.run(
                [sys.executable, "-m", "mypy", "--strict", "--no-incremental", *map(str, sources)],
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=RUNS_IN,
            )
            lines = ", ".join(f"{s.name} is {page}:{b.line}" for s, b in zip(sources, python, strict=True))
            assert typed.returncode == 0, f"{page} is not mypy --strict clean ({lines}):\n{typed.stdout}"
        for source, block in zip(sources, python, strict=True):
            ran = subprocess.run(
                [sys.executable, str(source)],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=RUNS_IN,
            )
            assert ran.returncode == 0, (
                f"{page}:{block.line} failed:\n{ran.stdout[-2000:]}\n{ran.stderr[-2000:]}"
            )


def checking(text: str, first_line: int, shown: dict[int, str]) -> str:
    """The block with each one-line command that shows its output between markers; `shown`
    gets the output each shows, by the page's line number."""
    lines, statement = [], ""
    for number, line in enumerate(text.splitlines(), start=first_line):
        match = SHOWN.match(line) if not statement else None
        statement += line + "\n"
        if not complete(statement):
            lines.append(line)
            continue
        statement = ""
        if match is None:
            lines.append(line)
            continue
        shown[number] = match["shown"]
        lines += [f"echo '@@shown {number}'", match["command"], "echo", "echo '@@end'"]
    return "\n".join(lines) + "\n"


def complete(statement: str) -> bool:
    """Whether the shell lines so far end a command (quotes closed, no continuation)."""
    try:
        shlex.split(statement, comments=True)
    except ValueError:
        return False
    return not statement.rstrip().endswith(("\\", "|", "&&", "$("))


def misprinted(stdout: str, shown: dict[int, str], page: str) -> list[str]:
    printed = {int(number): text.strip() for number, text in PRINTED.findall(stdout)}
    assert printed.keys() == shown.keys(), f"{page}: a command that shows its output did not run"
    wrong = []
    for number, text in sorted(shown.items()):
        pattern = ".*".join(map(re.escape, text.split("…")))
        if not re.fullmatch(pattern, printed[number], re.S):
            wrong.append(f"{page}:{number} shows {text}, prints {printed[number]}")
    return wrong


def _migrated_postgres(request: pytest.FixtureRequest) -> str:
    url: str = request.getfixturevalue("postgres_url")
    migrated = subprocess.run(
        [sys.executable, "-m", "simplequeue", "migrate"],
        env={**os.environ, "SIMPLEQUEUE_DATABASE_URL": url},
        capture_output=True,
        text=True,
        timeout=RUNS_IN,
    )
    assert migrated.returncode == 0, migrated.stderr[-2000:]
    return url


def test_the_readme_says_how_to_install_mkdocs() -> None:
    """`mkdocs` is in the dev install only: the README gives the command that adds it, with the
    requirement the dev install has."""
    dev = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["dev"]
    [requirement] = [r for r in dev if r.startswith("mkdocs")]
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert f"`.venv/bin/pip install '{requirement}'`" in readme
    assert "`.venv/bin/mkdocs serve`" in readme


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr[-4000:]
    reference = (tmp_path / "site" / "reference" / "index.html").read_text(encoding="utf-8")
    assert "operationId <code>push</code>" in reference, "the API reference is written from the spec"
