"""`simplequeue spark ingest` as a person runs it, without an activated virtualenv: files of each
format into a queue of a live serve, the row count printed; bad input as one line."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.test_e2e import serving, simplequeue_command

pytestmark = pytest.mark.e2e
pytest.importorskip("pyspark", reason="pip install 'simplequeue[spark]'")


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if shutil.which("java") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI needs Java for the Spark tests")
        pytest.skip("no java")
    with serving(f"sqlite:///{tmp_path_factory.mktemp('ingest') / 'ingest.db'}") as base:
        yield base


def ingest(url: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*simplequeue_command(), "spark", "ingest", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env={"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"), "SIMPLEQUEUE_URL": url},
    )


def payloads(url: str, queue: str) -> list[object]:
    with httpx.Client(base_url=url) as http:
        return [
            i["payload"] for i in http.post("/pop", json={"queue": queue, "max_items": 100}).json()["items"]
        ]


def test_json_lines_and_csv_are_pushed_and_counted(url: str, tmp_path: Path) -> None:
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps({"n": n}) + "\n" for n in range(7)))
    (tmp_path / "rows.csv").write_text("a,b\n1,x\n2,y\n")

    done = ingest(url, "--queue", "from-jsonl", "rows.jsonl", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == {"queue": "from-jsonl", "rows": 7}
    assert sorted(p["n"] for p in payloads(url, "from-jsonl")) == list(range(7))  # type: ignore[index]

    done = ingest(url, "-q", "from-csv", "rows.csv", cwd=tmp_path)
    assert json.loads(done.stdout) == {"queue": "from-csv", "rows": 2}
    assert payloads(url, "from-csv") == [{"a": "1", "b": "x"}, {"a": "2", "b": "y"}]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["-q", "x", "missing.parquet"], "missing.parquet: no such file or directory"),
        (["-q", "x", "rows.txt"], "rows.txt: cannot tell its format from its name"),
        (
            ["-q", "x", "--url", "http://127.0.0.1:9", "rows.jsonl"],
            "simplequeue at http://127.0.0.1:9 does not answer",
        ),
    ],
)
def test_bad_input_is_one_line(url: str, tmp_path: Path, args: list[str], says: str) -> None:
    (tmp_path / "rows.jsonl").write_text('{"n": 1}\n')
    (tmp_path / "rows.txt").write_text("n\n")
    done = ingest(url, *args, cwd=tmp_path)
    assert done.returncode == 1
    errors = [line for line in done.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, done.stderr[-2000:]
    assert says in errors[0]
    assert "Traceback" not in done.stderr
