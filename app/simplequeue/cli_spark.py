"""`simplequeue spark ingest PATH`: load a Parquet, CSV or JSON-lines file into a queue through
the Spark data source (on a local Spark unless SPARK_* settings say otherwise). Needs
`pip install 'simplequeue[spark]'` and Java."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click

from simplequeue.cli_client import Failed, api_key, url_option

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
    # The executors' Python is this one, whether or not a virtualenv is active.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    try:
        from pyspark.sql import SparkSession

        from simplequeue.spark import register
    except ImportError:
        raise Failed("the spark commands need PySpark: pip install 'simplequeue[spark]'") from None

    session = SparkSession.builder.appName("simplequeue ingest").getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    try:
        register(session)
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


def _first_line(exc: Exception) -> str:
    """The line of a Spark error that says what went wrong (ours start with 'simplequeue' or
    'option'/'column'), else its first line."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    for line in lines:
        for marker in ("OptionError: ", "RuntimeError: ", "BadRow: ", "AnalysisException: "):
            if marker in line:
                return line.split(marker, 1)[1]
    return lines[0] if lines else type(exc).__name__
