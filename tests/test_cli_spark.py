"""`simplequeue spark ingest` as a person runs it, without an activated virtualenv: files of each
format into a queue of a live serve, the row count printed, CSV columns typed, rows keyed by a
column so that a rerun pushes nothing new; each mistake as one line, found before Spark starts."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.test_e2e import serving, simplequeue_command

pytestmark = pytest.mark.e2e

ADMIN_KEY = "spark-admin-key-0123456789"
PRODUCER_KEY = "spark-producer-key-0123456789"
NARROW_KEY = "spark-narrow-key-0123456789"
KEYS = [
    {"key": ADMIN_KEY, "role": "admin"},
    {"key": PRODUCER_KEY, "role": "producer"},
    {"key": NARROW_KEY, "role": "producer", "queues": ["only-*"]},
]
# The CLI with PySpark made unimportable: a check that passed would end in "the spark commands
# need PySpark", so each mistake's own line proves it was found before anything of Spark loaded.
WITHOUT_PYSPARK = (
    "import runpy, sys; sys.modules['pyspark'] = None; runpy.run_module('simplequeue', run_name='__main__')"
)


# The JVM each Spark command starts, tuned for a short life: the first JIT tier only and the serial
# collector (a JVM that lives seconds spends much of its CPU compiling and collecting, on cores the
# command's Python and the service share). How fast the JVM starts, not what Spark does.
JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A serve for the Spark jobs (which need PySpark and Java)."""
    pytest.importorskip("pyspark", reason="pip install 'simplequeue[spark]'")
    if shutil.which("java") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI needs Java for the Spark tests")
        pytest.skip("no java")
    with serving(f"sqlite:///{tmp_path_factory.mktemp('ingest') / 'ingest.db'}") as base:
        yield base


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A serve with API keys, for the checks (which need neither PySpark nor Java)."""
    env = {"SIMPLEQUEUE_API_KEYS": json.dumps(KEYS)}
    with serving(f"sqlite:///{tmp_path_factory.mktemp('keyed') / 'keyed.db'}", env=env) as base:
        yield base


def run(
    url: str, *args: str, cwd: Path, key: str | None = None, command: list[str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": os.environ.get("HOME", "/tmp"),
        "SIMPLEQUEUE_URL": url,
        "JAVA_TOOL_OPTIONS": JAVA_OPTIONS,
    }
    if key:
        env["SIMPLEQUEUE_API_KEY"] = key
    return subprocess.run(
        [*(command or simplequeue_command()), "spark", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env=env,
    )


def ingest(url: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run(url, "ingest", *args, cwd=cwd)


def payloads(url: str, queue: str) -> list[object]:
    with httpx.Client(base_url=url) as http:
        return [
            i["payload"] for i in http.post("/pop", json={"queue": queue, "max_items": 100}).json()["items"]
        ]


def test_json_lines_are_pushed_and_counted(url: str, tmp_path: Path) -> None:
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps({"n": n}) + "\n" for n in range(7)))
    done = ingest(url, "--queue", "from-jsonl", "rows.jsonl", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == {"queue": "from-jsonl", "rows": 7, "pushed": 7, "skipped": 0}
    assert sorted(p["n"] for p in payloads(url, "from-jsonl")) == list(range(7))  # type: ignore[index]


def test_csv_columns_are_typed_inferred_or_as_given(url: str, tmp_path: Path) -> None:
    (tmp_path / "rows.csv").write_text("id,name,price,zip\n1,x,14.14,01234\n2,y,3.5,02345\n")

    done = ingest(url, "-q", "csv-inferred", "rows.csv", cwd=tmp_path)
    assert json.loads(done.stdout)["rows"] == 2, done.stderr[-2000:]
    assert payloads(url, "csv-inferred") == [
        {"id": 1, "name": "x", "price": 14.14, "zip": 1234},
        {"id": 2, "name": "y", "price": 3.5, "zip": 2345},
    ]
    schema = "id string, name string, price double, zip string"
    done = ingest(url, "-q", "csv-schema", "--schema", schema, "rows.csv", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert payloads(url, "csv-schema") == [
        {"id": "1", "name": "x", "price": 14.14, "zip": "01234"},
        {"id": "2", "name": "y", "price": 3.5, "zip": "02345"},
    ]
    done = ingest(url, "-q", "csv-text", "--no-infer-schema", "rows.csv", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert payloads(url, "csv-text")[0] == {"id": "1", "name": "x", "price": "14.14", "zip": "01234"}


def test_a_key_column_makes_a_rerun_push_nothing_new(url: str, tmp_path: Path) -> None:
    (tmp_path / "orders.jsonl").write_text(
        "".join(json.dumps({"order": n, "total": n * 1.5}) + "\n" for n in range(5))
    )
    for pushed in (5, 0):  # the rerun pushes nothing, and says so
        done = ingest(url, "-q", "orders", "--key-column", "order", "orders.jsonl", cwd=tmp_path)
        said = {"queue": "orders", "rows": 5, "pushed": pushed, "skipped": 5 - pushed}
        assert json.loads(done.stdout) == said, done.stderr[-2000:]
    with httpx.Client(base_url=url) as http:
        assert http.get("/queues/orders").json()["ready"] == 5  # not 10
        popped = http.post("/pop", json={"queue": "orders", "max_items": 100}).json()["items"]
        keys = {http.get(f"/items/{i['id']}").json()["dedup_key"] for i in popped}
    assert keys == {"0", "1", "2", "3", "4"}  # a number column's value, as text
    assert sorted(i["payload"]["order"] for i in popped) == list(range(5))  # still in the payload

    (tmp_path / "gaps.csv").write_text("order,total\n1,2\n,3\n")
    done = ingest(url, "-q", "gaps", "--key-column", "order", "gaps.csv", cwd=tmp_path)
    assert done.returncode == 1
    assert "Error: --key-column order: 1 of 2 rows have no value" in done.stderr
    assert payloads(url, "gaps") == []


@pytest.mark.parametrize(
    ("args", "key", "says", "status"),
    [
        (["ingest", "-q", "x", "missing.parquet"], None, "missing.parquet: no such file or directory", 1),
        (["ingest", "-q", "x", "rows.txt"], None, "rows.txt: cannot tell its format from its name", 1),
        (["ingest", "-q", "x", "--schema", "n int", "rows.parquet"], None, "--schema is for csv and json", 2),
        (
            ["ingest", "-q", "x", "--url", "notaurl", "rows.jsonl"],
            None,
            "'notaurl' is not the service's URL",
            2,
        ),
        (
            ["ingest", "-q", "x", "--url", "http://127.0.0.1:9", "rows.jsonl"],
            None,
            "simplequeue at http://127.0.0.1:9 does not answer",
            4,
        ),
        (
            ["ingest", "-q", "bad queue!", "rows.jsonl"],
            PRODUCER_KEY,
            "'bad queue!' cannot be a queue's name",
            1,
        ),
        (["ingest", "-q", "q" * 129, "rows.jsonl"], PRODUCER_KEY, "cannot be a queue's name: 1 to 128", 1),
        (["ingest", "-q", "x", "rows.jsonl"], None, "wants an API key: set SIMPLEQUEUE_API_KEY", 1),
        (
            ["ingest", "-q", "x", "rows.jsonl"],
            "not-a-key-of-this-service",
            "does not know the API key in SIMPLEQUEUE_API_KEY",
            1,
        ),
        (
            ["ingest", "-q", "x", "rows.jsonl"],
            NARROW_KEY,
            "refused the API key in SIMPLEQUEUE_API_KEY to push to queue 'x': this key may not use queue 'x'",
            1,
        ),
        (["report", "--out", "out", "-q", "never-made"], ADMIN_KEY, "has no queue 'never-made'", 1),
        (["report", "--out", "out", "-q", "made"], PRODUCER_KEY, "a producer key may not administer", 1),
    ],
)
def test_each_mistake_is_one_line_before_spark_starts(
    keyed: str, tmp_path: Path, args: list[str], key: str | None, says: str, status: int
) -> None:
    (tmp_path / "rows.jsonl").write_text('{"n": 1}\n')
    (tmp_path / "rows.txt").write_text("n\n")
    (tmp_path / "rows.parquet").write_bytes(b"PAR1")
    httpx.post(
        f"{keyed}/push",
        json={"queue": "made", "payload": 1},
        headers={"Authorization": f"Bearer {ADMIN_KEY}"},
    )
    done = run(keyed, *args, cwd=tmp_path, key=key, command=[sys.executable, "-c", WITHOUT_PYSPARK])
    assert done.returncode == status, done.stderr[-2000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, done.stderr[-2000:]
    assert says in errors[0]
    assert "Traceback" not in done.stderr
    assert "PySpark" not in done.stderr  # never reached: Spark would have been next


# A user's script, run with the virtualenv's python (not activated): SESSION_FIRST builds the
# session before it imports simplequeue.spark.
USER_SCRIPT = """
import sys
from pyspark.sql import SparkSession
{imports}
spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
{late_imports}
register(spark)
frame = spark.createDataFrame([('{{"n": 1}}',), ('{{"n": 2}}',)], "payload string")
writer = frame.write.format("simplequeue").option("url", sys.argv[1]).option("queue", sys.argv[2])
writer.mode("append").save()
"""
IMPORT = "from simplequeue.spark import register"


def run_script(
    url: str, queue: str, tmp_path: Path, *, session_first: bool
) -> subprocess.CompletedProcess[str]:
    """As `.venv/bin/python script.py`: PYSPARK_PYTHON unset, and on PATH a `python3` that has not
    simplequeue (the interpreter the virtualenv was made from), as on a machine where it is the
    system's."""
    script = tmp_path / "script.py"
    imports = ("", IMPORT) if session_first else (IMPORT, "")
    script.write_text(USER_SCRIPT.format(imports=imports[0], late_imports=imports[1]))
    bare = tmp_path / "bin"
    bare.mkdir(exist_ok=True)
    (bare / "python3").unlink(missing_ok=True)
    (bare / "python3").symlink_to(
        Path(sys.base_prefix) / "bin" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
    )
    env = {
        "PATH": f"{bare}:/usr/bin:/bin",
        "HOME": os.environ.get("HOME", "/tmp"),
        "JAVA_TOOL_OPTIONS": JAVA_OPTIONS,
    }
    return subprocess.run(
        [sys.executable, str(script), url, queue],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env=env,
    )


def test_a_script_run_with_the_venvs_python_writes_without_pyspark_python(url: str, tmp_path: Path) -> None:
    done = run_script(url, "from-script", tmp_path, session_first=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert sorted(p["n"] for p in payloads(url, "from-script")) == [1, 2]  # type: ignore[index]


def test_a_session_whose_workers_cannot_import_simplequeue_is_refused_at_register(
    url: str, tmp_path: Path
) -> None:
    done = run_script(url, "never-written", tmp_path, session_first=True)
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(
        "simplequeue.spark.interpreter.WorkersCannotImport: Spark's Python workers run "
    ), last
    assert f"which cannot import simplequeue: set PYSPARK_PYTHON={sys.executable} before" in last, last
    assert "ModuleNotFoundError" not in done.stderr  # said before any task ran
    assert httpx.get(f"{url}/queues/never-written").status_code == 404


def test_the_spark_package_knows_the_services_rule_for_queue_names() -> None:
    from simplequeue.api.fields import QUEUE_NAME_PATTERN
    from simplequeue.spark.options import QUEUE_NAME_PATTERN as REPEATED

    assert REPEATED == QUEUE_NAME_PATTERN


def test_the_local_session_keeps_to_loopback(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Loopback settings for the session the CLI starts itself, never for one spark-submit or
    Spark's own settings point at a cluster."""
    from simplequeue.cli.spark import local_master

    for name in ("PYSPARK_GATEWAY_PORT", "PYSPARK_SUBMIT_ARGS", "MASTER"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    assert local_master()
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", "--master spark://cluster:7077 pyspark-shell")
    assert not local_master()
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", "--master local[2] pyspark-shell")
    assert local_master()
    monkeypatch.delenv("PYSPARK_SUBMIT_ARGS")
    (tmp_path / "spark-defaults.conf").write_text("spark.master   yarn\n")
    assert not local_master()
    (tmp_path / "spark-defaults.conf").unlink()
    monkeypatch.setenv("MASTER", "k8s://https://api:6443")
    assert not local_master()
    monkeypatch.delenv("MASTER")
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "40000")  # inside spark-submit: its JVM, its settings
    assert not local_master()


def finish(
    url: str, queue: str, count: int, errors: list[str], retried: int = 0, retention_seconds: int = 604800
) -> None:
    """Push `count` items; fail `retried` of them once (retried at once), then complete all but
    len(errors), which die with those errors."""
    with httpx.Client(base_url=url, timeout=30) as http:
        http.put(f"/queues/{queue}", json={"max_attempts": 3, "retention_seconds": retention_seconds})
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
    finish(url, "report-unkept", 5, ["gone"], retention_seconds=0)  # keeps no history
    done = run(url, "report", "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    page = Path(done.stdout.strip().splitlines()[-1])
    assert page == tmp_path / "out" / "report.html"
    assert "report: drawing charts" in done.stderr  # progress, on stderr
    # What the report cannot see, it says: on the way and on the page.
    assert "keeping no history (retention_seconds 0): report-unkept" in done.stderr
    assert "retention_seconds</code> 0), whose finished items leave no record: report-unkept." in (
        page.read_text()
    )

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
    assert "report-unkept" not in summary
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


def test_the_report_with_many_queues_folds_the_rest_and_groups_errors_across_them(
    url: str, tmp_path: Path
) -> None:
    """Twelve queues (tried as a new user would with more than a handful): the busiest are drawn
    by name, the rest folded into "other (K queues)", and errors that differ only by an address
    are one row across the queues."""
    for n in range(12):
        finish(url, f"many-{n:02}", 2 + n, [f"mailbox full: user{n}@example.com"])
    done = run(url, "report", "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    page = Path(done.stdout.strip().splitlines()[-1])
    text = page.read_text()
    folded = re.search(r"other \((\d+) queues\)", text)
    assert folded is not None, text[:2000]
    assert int(folded.group(1)) >= 12 - 8  # the service may hold other tests' queues too
    assert re.search(r"Every queue \((\d+)\), busiest first", text)
    for chart in ("throughput", "latency", "attempts", "dead_ratio"):
        assert (page.parent / "charts" / f"{chart}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    import pyarrow.parquet as pq

    summary = {r["queue"] for r in pq.read_table(page.parent / "summary.parquet").to_pylist()}
    assert {f"many-{n:02}" for n in range(12)} <= summary
    assert "mailbox full: &lt;email&gt;" in text  # one group for twelve addresses
    assert "user3@example.com" in text or "user11@example.com" in text  # shown as one was written
