"""`simplequeue spark ingest` as a person runs it, without an activated virtualenv: files of each
format into a queue of a live serve, the row count printed; bad input as one line."""

from __future__ import annotations

import json
import os
import re
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


def finish(url: str, queue: str, count: int, errors: list[str], retried: int = 0) -> None:
    """Push `count` items; fail `retried` of them once (retried at once), then complete all but
    len(errors), which die with those errors."""
    with httpx.Client(base_url=url, timeout=30) as http:
        http.put(f"/queues/{queue}", json={"max_attempts": 3})
        items = [{"payload": {"n": n}} for n in range(count)]
        assert http.post("/push/batch", json={"queue": queue, "items": items}).status_code == 201
        popped = http.post("/pop", json={"queue": queue, "max_items": 100}).json()["items"]
        for item in popped[:retried]:
            body = {"error": "flaky", "lease_token": item["lease_token"], "retry_after_seconds": 0}
            http.post(f"/items/{item['id']}/fail", json=body)
        popped = popped[retried:] + http.post("/pop", json={"queue": queue, "max_items": 100}).json()["items"]
        for item, error in zip(popped, errors, strict=False):
            body = {"error": error, "lease_token": item["lease_token"], "retry": False}
            http.post(f"/items/{item['id']}/fail", json=body)
        for item in popped[len(errors) :]:
            http.delete(f"/items/{item['id']}", params={"lease_token": item["lease_token"]})


def test_the_report_writes_charts_html_and_parquet_aggregates(url: str, tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    finish(url, "report-mail", 20, ["smtp timeout"] * 3 + ["<bad address>"] * 2, retried=4)
    finish(url, "report-thumbs", 10, [])
    done = subprocess.run(
        [*simplequeue_command(), "spark", "report", "--url", url, "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp")},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    page = Path(done.stdout.strip().splitlines()[-1])
    assert page == tmp_path / "out" / "report.html"
    assert "report: drawing charts" in done.stderr  # progress, on stderr

    text = page.read_text()
    charts = re.findall(r"<img src='([^']+)'", text)
    assert charts == [f"charts/{n}.png" for n in ("throughput", "latency", "attempts", "dead_ratio")]
    for chart in charts:
        assert (page.parent / chart).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "&lt;bad address&gt;" in text  # escaped
    assert "<bad address>" not in text

    summary = {r["queue"]: r for r in pq.read_table(page.parent / "summary.parquet").to_pylist()}
    mail = summary["report-mail"]
    assert (mail["finished"], mail["completed"], mail["dead"]) == (20, 15, 5)
    assert mail["dead_ratio"] == pytest.approx(0.25)
    assert mail["wait_p50_s"] >= 0
    assert mail["processing_p99_s"] >= mail["processing_p50_s"]
    assert (summary["report-thumbs"]["completed"], summary["report-thumbs"]["dead"]) == (10, 0)
    errors = pq.read_table(page.parent / "top_errors.parquet").to_pylist()
    assert [(e["queue"], e["rank"], e["error"], e["count"]) for e in errors] == [
        ("report-mail", 1, "smtp timeout", 3),
        ("report-mail", 2, "<bad address>", 2),
    ]
    attempts = {
        (r["queue"], r["attempts"]): r["count"]
        for r in pq.read_table(page.parent / "attempts.parquet").to_pylist()
    }
    assert attempts == {("report-mail", 1): 16, ("report-mail", 2): 4, ("report-thumbs", 1): 10}
    throughput = pq.read_table(page.parent / "throughput.parquet").to_pylist()
    assert sum(r["count"] for r in throughput) == 30
    assert all(r["minute"].second == 0 and r["minute"].tzinfo is not None for r in throughput)
