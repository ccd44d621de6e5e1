"""What a queue report is made of: the history, read through the data source (the `simplequeue`
format, registered on the session), its aggregates computed with Spark, and those aggregates
written as Parquet.

Wait time is created_at to first_popped_at; processing time is first_popped_at to finished_at.
Errors are grouped once their variable parts are replaced (shaping.ERROR_PATTERNS), each group
with one of its messages as it was written, for an example.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.window import Window

from simplequeue.client import Client
from simplequeue.reports.shaping import ERROR_PATTERNS, group_queues

TOP_ERRORS = 10
QUANTILES = (0.5, 0.95, 0.99)


@dataclass(frozen=True)
class ReportRequest:
    url: str
    out: Path
    queue: str | None
    since: datetime | None
    until: datetime
    api_key: str | None


@dataclass
class Aggregates:
    summary: list[dict[str, Any]]
    throughput: list[dict[str, Any]]
    attempts: list[dict[str, Any]]
    top_errors: list[dict[str, Any]]
    # The queues folded into "other (K queues)" by the charts, as one summary row (quantiles
    # cannot be summed, so Spark works them out), or None when every queue is drawn.
    other: dict[str, Any] | None = None
    # The most frequent errors over every queue: error, count, queues (how many had it), example.
    errors_overall: list[dict[str, Any]] = field(default_factory=list)


def without_history(request: ReportRequest) -> list[str]:
    """The queues in the report's scope that keep no history (retention_seconds 0): their items
    finish without a record, so the report cannot count them. Asked of the service by the driver."""
    with Client(request.url, api_key=request.api_key, timeout=30.0) as sq:
        queues = sq.queues()
    return sorted(
        q.name for q in queues if q.settings.get("retention_seconds") == 0 and request.queue in (None, q.name)
    )


def history(spark: SparkSession, request: ReportRequest) -> DataFrame:
    reader = spark.read.format("simplequeue").option("url", request.url).option("source", "history")
    reader = reader.option("until", request.until.isoformat())
    if request.queue:
        reader = reader.option("queue", request.queue)
    if request.since:
        reader = reader.option("since", request.since.isoformat())
    if request.api_key:
        reader = reader.option("api_key", request.api_key)
    return reader.load()


def normalised_error(column: str) -> Column:
    result = F.coalesce(F.col(column), F.lit("(no error recorded)"))
    for pattern, placeholder in ERROR_PATTERNS:
        result = F.regexp_replace(result, pattern, placeholder)
    return result


def _summary_columns() -> list[Column]:
    quantiles = F.array(*[F.lit(q) for q in QUANTILES])
    return [
        F.count("*").alias("finished"),
        F.sum(F.when(F.col("outcome") == "completed", 1).otherwise(0)).alias("completed"),
        F.sum(F.when(F.col("outcome") == "dead", 1).otherwise(0)).alias("dead"),
        F.percentile_approx("wait_s", quantiles).alias("wait"),
        F.percentile_approx("processing_s", quantiles).alias("processing"),
        F.min("finished_at").alias("first_finished_at"),
        F.max("finished_at").alias("last_finished_at"),
    ]


def _summary_row(row: dict[str, Any]) -> dict[str, Any]:
    row["dead_ratio"] = row["dead"] / row["finished"] if row["finished"] else None
    for name in ("wait", "processing"):
        values = row.pop(name) or [None] * len(QUANTILES)
        for q, v in zip(QUANTILES, values, strict=True):
            row[f"{name}_p{round(q * 100)}_s"] = v
    return row


def aggregate(frame: DataFrame) -> Aggregates:
    timed = (
        frame.withColumn(
            "wait_s", F.unix_micros("first_popped_at") / 1e6 - F.unix_micros("created_at") / 1e6
        ).withColumn(
            "processing_s", F.unix_micros("finished_at") / 1e6 - F.unix_micros("first_popped_at") / 1e6
        )
    ).cache()
    summary = timed.groupBy("queue").agg(*_summary_columns()).orderBy("queue")
    rows = [_summary_row(r.asDict()) for r in summary.collect()]
    grouping = group_queues(rows)
    other = None
    if grouping.others:
        folded = timed.where(F.col("queue").isin(grouping.others)).agg(*_summary_columns()).first()
        if folded is not None:
            other = _summary_row({"queue": grouping.other_label, **folded.asDict()})
    throughput = (
        timed.groupBy("queue", F.date_trunc("minute", "finished_at").alias("minute"), "outcome")
        .count()
        .orderBy("queue", "minute", "outcome")
    )
    attempts = timed.groupBy("queue", "attempts").count().orderBy("queue", "attempts")
    dead = timed.where(F.col("outcome") == "dead").withColumn("error", normalised_error("last_error"))
    errors = dead.groupBy("queue", "error").agg(
        F.count("*").alias("count"), F.min(F.coalesce("last_error", F.lit(""))).alias("example")
    )
    ranked = errors.withColumn(
        "rank",
        F.row_number().over(Window.partitionBy("queue").orderBy(F.desc("count"), "error")),
    )
    top = ranked.where(F.col("rank") <= TOP_ERRORS).orderBy("queue", "rank")
    overall = (
        dead.groupBy("error")
        .agg(
            F.count("*").alias("count"),
            F.countDistinct("queue").alias("queues"),
            F.min(F.coalesce("last_error", F.lit(""))).alias("example"),
        )
        .orderBy(F.desc("count"), "error")
        .limit(TOP_ERRORS)
    )
    result = Aggregates(
        summary=rows,
        throughput=[r.asDict() for r in throughput.collect()],
        attempts=[r.asDict() for r in attempts.collect()],
        top_errors=[r.asDict() for r in top.collect()],
        other=other,
        errors_overall=[r.asDict() for r in overall.collect()],
    )
    timed.unpersist()
    return result


def write_parquet(out: Path, aggregates: Aggregates) -> list[str]:
    schemas = {
        "summary": pa.schema(
            [
                ("queue", pa.string()),
                ("finished", pa.int64()),
                ("completed", pa.int64()),
                ("dead", pa.int64()),
                ("dead_ratio", pa.float64()),
                ("first_finished_at", pa.timestamp("us", tz="UTC")),
                ("last_finished_at", pa.timestamp("us", tz="UTC")),
                *[
                    (f"{name}_p{round(q * 100)}_s", pa.float64())
                    for name in ("wait", "processing")
                    for q in QUANTILES
                ],
            ]
        ),
        "throughput": pa.schema(
            [
                ("queue", pa.string()),
                ("minute", pa.timestamp("us", tz="UTC")),
                ("outcome", pa.string()),
                ("count", pa.int64()),
            ]
        ),
        "attempts": pa.schema([("queue", pa.string()), ("attempts", pa.int32()), ("count", pa.int64())]),
        "top_errors": pa.schema(
            [
                ("queue", pa.string()),
                ("rank", pa.int32()),
                ("error", pa.string()),
                ("count", pa.int64()),
                ("example", pa.string()),
            ]
        ),
    }
    written = []
    for name, schema in schemas.items():
        rows = [{k: utc(v) for k, v in row.items()} for row in getattr(aggregates, name)]
        pq.write_table(pa.Table.from_pylist(rows, schema=schema), out / f"{name}.parquet")
        written.append(f"{name}.parquet")
    return written


def utc(value: Any) -> Any:
    # Spark hands timestamps back as naive local times of this process: astimezone() reads them so.
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.astimezone()).astimezone(UTC)
    return value
