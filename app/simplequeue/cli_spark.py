"""`simplequeue spark ingest PATH`: load a Parquet, CSV or JSON-lines file into a queue through
the Spark data source (on a local Spark unless SPARK_* settings say otherwise). Needs
`pip install 'simplequeue[spark]'` and Java."""

from __future__ import annotations

import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import click

from simplequeue.cli.client import Failed, api_key, url_option

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ISO_TIMES = ["%Y-%m-%d", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M:%S%z", "%Y-%m-%d %H:%M:%S"]
FORMATS = {".parquet": "parquet", ".csv": "csv", ".json": "json", ".jsonl": "json", ".ndjson": "json"}


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
@click.option("--batch-size", type=click.IntRange(1, 1000), default=500, show_default=True)
@click.argument("path")
def ingest(url: str, queue: str, file_format: str | None, batch_size: int, path: str) -> None:
    """Push every row of PATH to the queue, exactly once even when Spark retries tasks. A
    `payload` column is pushed as it is; otherwise each row becomes a JSON object. Prints how
    many rows were pushed."""
    file_format = file_format or FORMATS.get(Path(path).suffix.lower())
    if file_format is None:
        raise Failed(f"{path}: cannot tell its format from its name; give --format parquet|csv|json")
    if "://" not in path and not Path(path).exists():
        raise Failed(f"{path}: no such file or directory")
    session = _session("simplequeue ingest")
    try:
        reader = session.read.option("header", "true") if file_format == "csv" else session.read
        frame = reader.format(file_format).load(path)
        if "payload" not in frame.columns:
            frame = frame.selectExpr("to_json(struct(*)) AS payload")
        rows = frame.count()
        writer = (
            frame.write.format("simplequeue")
            .option("url", url)
            .option("queue", queue)
            .option("batch_size", str(batch_size))
        )
        if key := api_key():
            writer = writer.option("api_key", key)
        writer.mode("append").save()
    except Exception as exc:  # Spark wraps ours (and its own) in long Java traces: one line
        raise Failed(_first_line(exc)) from None
    finally:
        session.stop()
    click.echo(json.dumps({"queue": queue, "rows": rows}))


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
def report(url: str, out: Path, queue: str | None, since: datetime | None, until: datetime | None) -> None:
    """Write OUT/report.html with PNG charts, and Parquet aggregates beside it: per queue,
    throughput per minute, wait and processing time p50/p95/p99, attempts, dead ratio, top errors.
    Reads the history the service keeps (each queue's retention_seconds)."""
    since, until = _utc(since), _utc(until) or datetime.now(UTC)
    if since is not None and since >= until:
        raise Failed(f"--since ({since.isoformat()}) must come before --until ({until.isoformat()})")
    session = _session("simplequeue report")
    try:
        from simplequeue.spark.report import ReportRequest, make_report

        request = ReportRequest(url.rstrip("/"), out, queue, since, until, api_key())
        page = make_report(session, request, lambda step: click.echo(f"report: {step}", err=True))
    except Exception as exc:
        raise Failed(_first_line(exc)) from None
    finally:
        session.stop()
    click.echo(str(page))


def _utc(moment: datetime | None) -> datetime | None:
    if moment is None:
        return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _session(name: str) -> SparkSession:
    """A Spark session (local unless SPARK_* settings or spark-submit say otherwise) with the
    data source registered."""
    # The executors' Python is this one, whether or not a virtualenv is active.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    try:
        from pyspark.sql import SparkSession

        from simplequeue.spark import register
    except ImportError:
        raise Failed("the spark commands need PySpark: pip install 'simplequeue[spark]'") from None
    session = SparkSession.builder.appName(name).getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    return session


def _first_line(exc: Exception) -> str:
    """The line of a Spark error that says what went wrong (ours start with 'simplequeue' or
    'option'/'column'), else its first line."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    for line in lines:
        for marker in ("OptionError: ", "RuntimeError: ", "BadRow: ", "AnalysisException: "):
            if marker in line:
                return line.split(marker, 1)[1]
    return lines[0] if lines else type(exc).__name__
