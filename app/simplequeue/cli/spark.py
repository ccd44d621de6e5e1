"""`simplequeue spark ingest PATH`: load a Parquet, CSV or JSON-lines file into a queue through
the Spark data source; `simplequeue spark report`: charts and aggregates of the queues' history.
Needs `pip install 'simplequeue[spark]'` and Java.

Before Spark starts (PySpark takes seconds to import and a JVM more to start), each command checks
what it can over HTTP alone: the URL, that the service answers and is ready, the API key and the
queue's name; each mistake is one line and a non-zero exit within a few seconds.

Spark runs in local mode unless spark-submit, PYSPARK_SUBMIT_ARGS, spark-defaults.conf or MASTER
say otherwise. The local session this command starts keeps to loopback (driver and block manager on
127.0.0.1) and has no web UI unless --spark-ui; a session on a cluster is configured as its owner
set it."""

from __future__ import annotations

import json
import os
import shlex
import sys
import tempfile
from datetime import UTC, datetime
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import click

from simplequeue.cli.client import Failed, Unreachable, api_key, url_option
from simplequeue.spark.options import NoAnswer, OptionError, check_service, check_url

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, DataFrameReader, SparkSession

ISO_TIMES = ["%Y-%m-%d", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M:%S%z", "%Y-%m-%d %H:%M:%S"]
FORMATS = {".parquet": "parquet", ".csv": "csv", ".json": "json", ".jsonl": "json", ".ndjson": "json"}
LOOPBACK = "127.0.0.1"
# How long the checks wait for a connection (an address that drops packets fails in seconds) and
# for an answer (the service's readiness asks its database).
CONNECT_SECONDS = 2.0
ANSWER_SECONDS = 5.0


class BadUrl(Failed):
    exit_code = 2  # usage, as for the other commands' --url


spark_ui_option = click.option(
    "--spark-ui/--no-spark-ui",
    default=False,
    help="Serve Spark's web UI while the job runs (on 127.0.0.1 for the local session; its address "
    "is printed on stderr). Off by default.",
)


@click.group()
def spark() -> None:
    """Spark jobs over the service's HTTP API (needs simplequeue[spark] and Java)."""


@spark.command()
@url_option
@click.option("--queue", "-q", required=True, help="The queue to push to.")
@click.option(
    "--format",
    "file_format",
    type=click.Choice(["parquet", "csv", "json"]),
    default=None,
    help="Default: from PATH's extension (.parquet, .csv, .json/.jsonl/.ndjson).",
)
@click.option(
    "--key-column",
    metavar="COL",
    default=None,
    help="Key each row by COL: its value (as text) becomes the item's dedup_key, so rows with one "
    "value make one item and running the same ingest again pushes nothing new within the queue's "
    "dedup window (dedup_window_seconds, an hour by default), even for items already processed. "
    "The way to make reruns idempotent: without it every run pushes every row again. Every row "
    "needs a value (at most 128 characters, no space at its end).",
)
@click.option(
    "--infer-schema/--no-infer-schema",
    default=True,
    show_default=True,
    help="CSV: read numbers, booleans and times as such (one more pass over the file); with "
    "--no-infer-schema every column is text. JSON and Parquet carry their own types.",
)
@click.option(
    "--schema",
    "ddl",
    metavar="DDL",
    default=None,
    help='CSV or JSON: the columns and their types, e.g. "id string, price double, at timestamp" '
    "(instead of inferring them; a zip code stays '01234').",
)
@click.option("--batch-size", type=click.IntRange(1, 1000), default=500, show_default=True)
@spark_ui_option
@click.argument("path")
def ingest(
    url: str,
    queue: str,
    file_format: str | None,
    key_column: str | None,
    infer_schema: bool,
    ddl: str | None,
    batch_size: int,
    spark_ui: bool,
    path: str,
) -> None:
    """Push every row of PATH to the queue, exactly once even when Spark retries tasks. A
    `payload` column is pushed as it is (with `dedup_key`, `priority`, `group`... columns beside it
    if there are); otherwise each row becomes a JSON object. Prints how many rows were read, how
    many of them were pushed, and how many skipped (their key was in the queue already).

    Run twice, it pushes every row twice, unless --key-column names a column that keys the rows."""
    file_format = file_format or FORMATS.get(Path(path).suffix.lower())
    if file_format is None:
        raise Failed(f"{path}: cannot tell its format from its name; give --format parquet|csv|json")
    if ddl is not None and file_format == "parquet":
        raise click.UsageError("--schema is for csv and json: a Parquet file carries its own")
    if key_column is not None and not key_column.strip():
        raise click.UsageError("--key-column needs a column's name")
    if "://" not in path and not Path(path).exists():
        raise Failed(f"{path}: no such file or directory")
    url = _checked(url, queue, to="push")
    session = _session("simplequeue ingest", spark_ui)
    with tempfile.TemporaryDirectory(prefix="simplequeue-ingest-") as scratch:
        summary = Path(scratch) / "summary.json"
        try:
            frame = _keyed(_read(session.read, file_format, ddl, infer_schema).load(path), key_column)
            rows = _count(frame, key_column)
            writer = (
                frame.write.format("simplequeue")
                .option("url", url)
                .option("queue", queue)
                .option("batch_size", str(batch_size))
                .option("_summary_path", str(summary))
            )
            if key := api_key():
                writer = writer.option("api_key", key)
            writer.mode("append").save()
        except Failed:
            raise
        except Exception as exc:  # Spark wraps ours (and its own) in long Java traces: one line
            raise Failed(_first_line(exc)) from None
        finally:
            session.stop()
        click.echo(json.dumps({"queue": queue, "rows": rows, **_pushed(summary)}))


def _pushed(summary: Path) -> dict[str, int]:
    """What the write's commit counted (on the driver, so on this machine): rows it pushed, and rows
    whose key was there before it (a rerun with --key-column). Nothing if the commit wrote none."""
    try:
        counted: dict[str, int] = json.loads(summary.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {"pushed": counted["pushed"], "skipped": counted["skipped"]}


def _read(reader: DataFrameReader, file_format: str, ddl: str | None, infer_schema: bool) -> DataFrameReader:
    reader = reader.format(file_format)
    if file_format == "csv":
        reader = reader.option("header", "true")
        if ddl is None and infer_schema:
            reader = reader.option("inferSchema", "true")
    if ddl is not None:
        try:
            reader = reader.schema(ddl)
        except Exception as exc:
            raise Failed(f"--schema {ddl!r}: {_first_line(exc)}") from None
    return reader


def _keyed(frame: DataFrame, key_column: str | None) -> DataFrame:
    """The rows as the data source takes them: a `payload` column (each row as JSON, unless there
    is one), and with --key-column a `dedup_key`: the column as text, null if empty."""
    from pyspark.sql import functions as F

    key = None
    if key_column is not None:
        if key_column not in frame.columns:
            raise Failed(
                f"--key-column {key_column}: no such column; the columns are {', '.join(frame.columns)}"
            )
        text = F.col(f"`{key_column.replace('`', '``')}`").cast("string")
        key = F.when(text != "", text).alias("dedup_key")
    if "payload" not in frame.columns:
        payload = F.to_json(F.struct("*")).alias("payload")
        return frame.select(payload, key) if key is not None else frame.select(payload)
    return frame.withColumn("dedup_key", key) if key is not None else frame


def _count(frame: DataFrame, key_column: str | None) -> int:
    """The rows; with --key-column, refused (before anything is pushed) if a row has no key or
    one the service would refuse: such a row would be pushed again by every rerun, or stop the
    ingest midway."""
    if key_column is None:
        return frame.count()
    from pyspark.sql import functions as F

    key = F.col("dedup_key")
    bad = (F.length(key) > 128) | key.endswith(" ")
    rows, keyed, refused = frame.agg(F.count(F.lit(1)), F.count(key), F.count(F.when(bad, 1))).first() or (
        0,
        0,
        0,
    )
    if keyed < rows:
        raise Failed(
            f"--key-column {key_column}: {rows - keyed} of {rows} rows have no value (null or empty); "
            "a row without a key would be pushed again by every rerun"
        )
    if refused:
        raise Failed(
            f"--key-column {key_column}: {refused} of {rows} rows have a value the service refuses as "
            "a key (longer than 128 characters, or ending with a space)"
        )
    return int(rows)


@spark.command()
@url_option
@click.option(
    "--out", "out", required=True, type=click.Path(file_okay=False, path_type=Path), help="Directory."
)
@click.option("--queue", "-q", default=None, help="One queue (default: every queue).")
@click.option(
    "--since", type=click.DateTime(ISO_TIMES), default=None, help="Finished at or after (UTC if no zone)."
)
@click.option("--until", type=click.DateTime(ISO_TIMES), default=None, help="Finished before (default: now).")
@spark_ui_option
def report(
    url: str, out: Path, queue: str | None, since: datetime | None, until: datetime | None, spark_ui: bool
) -> None:
    """Write OUT/report.html with PNG charts, and Parquet aggregates beside it: per queue,
    throughput per minute, wait and processing time p50/p95/p99, attempts, dead ratio, top errors.
    Reads the history the service keeps (each queue's retention_seconds); needs an admin API key
    when the service has keys."""
    since, until = _utc(since), _utc(until) or datetime.now(UTC)
    if since is not None and since >= until:
        raise Failed(f"--since ({since.isoformat()}) must come before --until ({until.isoformat()})")
    url = _checked(url, queue, to="read history")
    session = _session("simplequeue report", spark_ui)
    try:
        from simplequeue.reports.spark_report import ReportRequest, make_report

        request = ReportRequest(url, out, queue, since, until, api_key())
        page = make_report(session, request, lambda step: click.echo(f"report: {step}", err=True))
    except Exception as exc:
        raise Failed(_first_line(exc)) from None
    finally:
        session.stop()
    click.echo(str(page))


def _checked(url: str, queue: str | None, *, to: Literal["push", "read history"]) -> str:
    """The URL (without a trailing slash) once the service answered there, took the API key and
    the queue's name: each mistake one line, before PySpark is imported."""
    try:
        url = check_url(url)
    except OptionError as exc:
        raise BadUrl(f"--url/SIMPLEQUEUE_URL: {exc}") from None
    try:
        check_service(
            url,
            api_key(),
            queue,
            to=to,
            key_from="SIMPLEQUEUE_API_KEY",
            connect_timeout=CONNECT_SECONDS,
            read_timeout=ANSWER_SECONDS,
        )
    except NoAnswer as exc:
        raise Unreachable(str(exc)) from None
    except OptionError as exc:
        raise Failed(str(exc)) from None
    return url


def _utc(moment: datetime | None) -> datetime | None:
    if moment is None:
        return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _session(name: str, ui: bool) -> SparkSession:
    """A Spark session with the data source registered: local unless spark-submit or Spark's
    settings say otherwise. The local one binds to loopback only and has no UI unless asked."""
    # The executors' Python is this one, whether or not a virtualenv is active.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    local = local_master()
    if local:
        # Read by the JVM when it starts: where Spark binds what the settings below do not name.
        os.environ.setdefault("SPARK_LOCAL_IP", LOOPBACK)
    try:
        from pyspark.sql import SparkSession

        from simplequeue.spark import register
    except ImportError:
        raise Failed("the spark commands need PySpark: pip install 'simplequeue[spark]'") from None
    builder = SparkSession.builder.appName(name)
    if local:
        builder = builder.config("spark.driver.host", LOOPBACK).config("spark.driver.bindAddress", LOOPBACK)
    if local or ui:
        builder = builder.config("spark.ui.enabled", "true" if ui else "false")
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    if ui and session.sparkContext.uiWebUrl:
        click.echo(f"Spark UI: {session.sparkContext.uiWebUrl}", err=True)
    register(session)
    return session


def local_master() -> bool:
    """Whether the session this process creates runs Spark in local mode, as spark-submit picks
    its master: --master in PYSPARK_SUBMIT_ARGS, then spark.master in spark-defaults.conf, then
    MASTER, else local. False inside spark-submit or a PySpark shell (a JVM is already there,
    configured by whoever started it)."""
    if os.environ.get("PYSPARK_GATEWAY_PORT"):
        return False
    master = _submitted_master() or _defaults_master() or os.environ.get("MASTER") or "local[*]"
    return master.strip().startswith("local")


def _submitted_master() -> str | None:
    args = shlex.split(os.environ.get("PYSPARK_SUBMIT_ARGS", ""))
    for n, arg in enumerate(args):
        if arg == "--master" and n + 1 < len(args):
            return args[n + 1]
        if arg.startswith("--master="):
            return arg.split("=", 1)[1]
        if arg == "--conf" and n + 1 < len(args) and args[n + 1].startswith("spark.master="):
            return args[n + 1].split("=", 1)[1]
    return None


def _defaults_master() -> str | None:
    conf = os.environ.get("SPARK_CONF_DIR")
    if not conf:
        home = os.environ.get("SPARK_HOME")
        if not home:
            spec = find_spec("pyspark")  # pip's PySpark is its own SPARK_HOME; not imported here
            home = next(iter(spec.submodule_search_locations or []), None) if spec else None
        conf = str(Path(home) / "conf") if home else None
    if not conf:
        return None
    try:
        lines = (Path(conf) / "spark-defaults.conf").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        words = line.strip().replace("=", " ", 1).split(None, 1)
        if len(words) == 2 and words[0] == "spark.master":
            return words[1].strip()
    return None


def _first_line(exc: Exception) -> str:
    """The line of a Spark error that says what went wrong (ours start with 'simplequeue' or
    'option'/'column'), else its first line."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    for line in lines:
        for marker in ("OptionError: ", "RuntimeError: ", "BadRow: ", "AnalysisException: "):
            if marker in line:
                return line.split(marker, 1)[1]
    return lines[0] if lines else type(exc).__name__
