"""A report on what queues did: read their history through the data source, aggregate it with
Spark, write the aggregates as Parquet, draw PNG charts and one report.html that shows them.

    out/
      report.html            charts and tables, charts referenced by relative path
      charts/*.png
      summary.parquet        per queue: completed, dead, dead_ratio, wait and processing p50/p95/p99
      throughput.parquet     per queue, minute and outcome: items finished
      attempts.parquet       per queue and attempts: items
      top_errors.parquet     per queue: the most frequent last errors of dead items

Wait time is created_at to first_popped_at; processing time is first_popped_at to finished_at.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only: no display on a server or a Spark driver

import matplotlib.dates as mdates
import matplotlib.pyplot as plt
import pyarrow as pa
import pyarrow.parquet as pq
from matplotlib.figure import Figure
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.window import Window

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


def aggregate(frame: DataFrame) -> Aggregates:
    timed = (
        frame.withColumn(
            "wait_s", F.unix_micros("first_popped_at") / 1e6 - F.unix_micros("created_at") / 1e6
        ).withColumn(
            "processing_s", F.unix_micros("finished_at") / 1e6 - F.unix_micros("first_popped_at") / 1e6
        )
    ).cache()
    quantiles = F.array(*[F.lit(q) for q in QUANTILES])
    summary = (
        timed.groupBy("queue")
        .agg(
            F.count("*").alias("finished"),
            F.sum(F.when(F.col("outcome") == "completed", 1).otherwise(0)).alias("completed"),
            F.sum(F.when(F.col("outcome") == "dead", 1).otherwise(0)).alias("dead"),
            F.percentile_approx("wait_s", quantiles).alias("wait"),
            F.percentile_approx("processing_s", quantiles).alias("processing"),
            F.min("finished_at").alias("first_finished_at"),
            F.max("finished_at").alias("last_finished_at"),
        )
        .withColumn("dead_ratio", F.col("dead") / F.col("finished"))
        .orderBy("queue")
    )
    rows = []
    for r in summary.collect():
        row = r.asDict()
        for name in ("wait", "processing"):
            values = row.pop(name) or [None] * len(QUANTILES)
            for q, v in zip(QUANTILES, values, strict=True):
                row[f"{name}_p{round(q * 100)}_s"] = v
        rows.append(row)
    throughput = (
        timed.groupBy("queue", F.date_trunc("minute", "finished_at").alias("minute"), "outcome")
        .count()
        .orderBy("queue", "minute", "outcome")
    )
    attempts = timed.groupBy("queue", "attempts").count().orderBy("queue", "attempts")
    errors = (
        timed.where(F.col("outcome") == "dead")
        .groupBy("queue", F.coalesce("last_error", F.lit("(no error recorded)")).alias("error"))
        .count()
    )
    ranked = errors.withColumn(
        "rank",
        F.row_number().over(Window.partitionBy("queue").orderBy(F.desc("count"), "error")),
    )
    top = ranked.where(F.col("rank") <= TOP_ERRORS).orderBy("queue", "rank")
    result = Aggregates(
        summary=rows,
        throughput=[r.asDict() for r in throughput.collect()],
        attempts=[r.asDict() for r in attempts.collect()],
        top_errors=[r.asDict() for r in top.collect()],
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
            [("queue", pa.string()), ("rank", pa.int32()), ("error", pa.string()), ("count", pa.int64())]
        ),
    }
    written = []
    for name, schema in schemas.items():
        rows = [{k: _utc(v) for k, v in row.items()} for row in getattr(aggregates, name)]
        pq.write_table(pa.Table.from_pylist(rows, schema=schema), out / f"{name}.parquet")
        written.append(f"{name}.parquet")
    return written


def _utc(value: Any) -> Any:
    # Spark hands timestamps back as naive local times of this process: astimezone() reads them so.
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.astimezone()).astimezone(UTC)
    return value


def _chart(path: Path, draw: Callable[[Figure], None], width: float = 9.0, height: float = 3.6) -> None:
    figure = plt.figure(figsize=(width, height), dpi=110)
    try:
        draw(figure)
        figure.tight_layout()
        figure.savefig(path)
    finally:
        plt.close(figure)


def draw_charts(out: Path, aggregates: Aggregates) -> list[tuple[str, str]]:
    """Charts as (title, relative path)."""
    charts = out / "charts"
    charts.mkdir(parents=True, exist_ok=True)
    queues = [row["queue"] for row in aggregates.summary]
    made: list[tuple[str, str]] = []

    def throughput(figure: Figure) -> None:
        axes = figure.add_subplot()
        for queue in queues:
            points: dict[datetime, int] = {}
            for r in aggregates.throughput:
                if r["queue"] == queue:
                    minute = _utc(r["minute"])
                    points[minute] = points.get(minute, 0) + r["count"]
            xs = sorted(points)
            axes.plot(mdates.date2num(xs), [points[x] for x in xs], marker="o", markersize=3, label=queue)
        axes.set_ylabel("items finished per minute")
        axes.set_xlabel("minute (UTC)")
        locator = mdates.AutoDateLocator(tz=UTC, minticks=3, maxticks=8)
        axes.xaxis.set_major_locator(locator)
        axes.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator, tz=UTC))
        axes.grid(alpha=0.3)
        if queues:
            axes.legend(loc="upper left", fontsize="small")

    def latency(figure: Figure) -> None:
        for index, name in enumerate(("wait", "processing")):
            axes = figure.add_subplot(1, 2, index + 1)
            width = 0.8 / len(QUANTILES)
            for k, q in enumerate(QUANTILES):
                label = f"p{round(q * 100)}"
                values = [row[f"{name}_{label}_s"] or 0.0 for row in aggregates.summary]
                axes.bar([i + k * width for i in range(len(queues))], values, width, label=label)
            axes.set_xticks([i + width for i in range(len(queues))], queues, rotation=20, fontsize="small")
            axes.set_title(f"{name} time (seconds)")
            axes.grid(axis="y", alpha=0.3)
            axes.legend(fontsize="small")

    def attempts(figure: Figure) -> None:
        axes = figure.add_subplot()
        counts = sorted({r["attempts"] for r in aggregates.attempts})
        width = 0.8 / max(len(queues), 1)
        for k, queue in enumerate(queues):
            by = {r["attempts"]: r["count"] for r in aggregates.attempts if r["queue"] == queue}
            axes.bar(
                [i + k * width for i in range(len(counts))],
                [by.get(a, 0) for a in counts],
                width,
                label=queue,
            )
        axes.set_xticks(
            [i + width * (len(queues) - 1) / 2 for i in range(len(counts))], [str(a) for a in counts]
        )
        axes.set_xlabel("attempts")
        axes.set_ylabel("items (log scale)")
        axes.set_yscale("log")  # retries are a few percent of first attempts: both stay visible
        axes.grid(axis="y", alpha=0.3)
        if queues:
            axes.legend(fontsize="small")

    def dead_ratio(figure: Figure) -> None:
        axes = figure.add_subplot()
        ratios = [100 * (row["dead_ratio"] or 0.0) for row in aggregates.summary]
        bars = axes.barh(queues, ratios, color="#c0392b")
        axes.bar_label(bars, [f"{r:.1f}%" for r in ratios], padding=3, fontsize="small")
        axes.set_xlabel("dead, % of finished")
        axes.set_xlim(0, max([*ratios, 1.0]) * 1.2)
        axes.invert_yaxis()
        axes.grid(axis="x", alpha=0.3)

    for title, name, draw, height in (
        ("Throughput", "throughput.png", throughput, 3.6),
        ("Wait and processing time", "latency.png", latency, 3.6),
        ("Attempts per item", "attempts.png", attempts, 3.2),
        ("Dead ratio", "dead_ratio.png", dead_ratio, 0.9 + 0.35 * max(len(queues), 1)),
    ):
        _chart(charts / name, draw, height=height)
        made.append((title, f"charts/{name}"))
    return made


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    if value < 1:
        return f"{value * 1000:.0f} ms"
    if value < 120:
        return f"{value:.1f} s"
    return f"{value / 60:.1f} min"


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], classes: Sequence[str]) -> str:
    """Every cell escaped: queue names and errors are the callers' text."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>"
        + "".join(f"<td class='{c}'>{html.escape(cell)}</td>" for c, cell in zip(classes, row, strict=True))
        + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


STYLE = """
body { font: 15px/1.5 system-ui, sans-serif; margin: 2rem auto; max-width: 1040px;
       color: #1f2933; padding: 0 1rem; }
h1 { font-size: 1.6rem; margin-bottom: .2rem; }
.meta { color: #52606d; margin-top: 0; }
h2 { font-size: 1.15rem; margin-top: 2rem; border-bottom: 1px solid #e4e7eb; padding-bottom: .3rem; }
table { border-collapse: collapse; width: 100%; font-size: .92rem; }
th, td { text-align: left; padding: .35rem .6rem; border-bottom: 1px solid #e4e7eb; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
th { background: #f5f7fa; }
img { max-width: 100%; border: 1px solid #e4e7eb; border-radius: 4px; }
.empty { color: #52606d; font-style: italic; }
.error { font-family: ui-monospace, monospace; white-space: pre-wrap; word-break: break-word; }
"""


def write_html(
    out: Path, request: ReportRequest, aggregates: Aggregates, charts: list[tuple[str, str]], files: list[str]
) -> Path:
    scope = f"queue {request.queue}" if request.queue else "every queue"
    since = request.since.isoformat(timespec="seconds") if request.since else "the start of the history kept"
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>simplequeue report: {html.escape(scope)}</title><style>{STYLE}</style></head><body>",
        f"<h1>simplequeue report: {html.escape(scope)}</h1>",
        f"<p class='meta'>{html.escape(request.url)} · items finished from {html.escape(since)} to "
        f"{html.escape(request.until.isoformat(timespec='seconds'))} · made "
        f"{datetime.now(UTC).isoformat(timespec='seconds')}</p>",
    ]
    if not aggregates.summary:
        parts.append("<p class='empty'>No item finished in this time range.</p>")
    else:
        parts.append("<h2>Summary</h2>")
        parts.append(
            _table(
                [
                    "queue",
                    "finished",
                    "completed",
                    "dead",
                    "dead %",
                    "wait p50 / p95 / p99",
                    "processing p50 / p95 / p99",
                ],
                [
                    [
                        row["queue"],
                        f"{row['finished']:,}",
                        f"{row['completed']:,}",
                        f"{row['dead']:,}",
                        f"{100 * row['dead_ratio']:.1f}%",
                        " / ".join(_seconds(row[f"wait_p{round(q * 100)}_s"]) for q in QUANTILES),
                        " / ".join(_seconds(row[f"processing_p{round(q * 100)}_s"]) for q in QUANTILES),
                    ]
                    for row in aggregates.summary
                ],
                ["", "num", "num", "num", "num", "num", "num"],
            )
        )
        for title, path in charts:
            parts.append(
                f"<h2>{html.escape(title)}</h2><img src='{html.escape(path)}' alt='{html.escape(title)}'>"
            )
        parts.append("<h2>Top errors of dead items</h2>")
        if aggregates.top_errors:
            rows = [
                [r["queue"], str(r["rank"]), r["error"], f"{r['count']:,}"] for r in aggregates.top_errors
            ]
            parts.append(_table(["queue", "#", "error", "items"], rows, ["", "num", "error", "num"]))
        else:
            parts.append("<p class='empty'>No item died.</p>")
    listed = ", ".join(f"<a href='{html.escape(f)}'>{html.escape(f)}</a>" for f in files)
    parts.append(f"<h2>Data</h2><p>Parquet aggregates beside this page: {listed}.</p></body></html>")
    page = out / "report.html"
    page.write_text("\n".join(parts), encoding="utf-8")
    return page


def make_report(spark: SparkSession, request: ReportRequest, say: Callable[[str], None]) -> Path:
    request.out.mkdir(parents=True, exist_ok=True)
    say(f"reading the history of {request.queue or 'every queue'} from {request.url}")
    aggregates = aggregate(history(spark, request))
    finished = sum(row["finished"] for row in aggregates.summary)
    say(f"{finished:,} finished items in {len(aggregates.summary)} queues; writing Parquet aggregates")
    files = write_parquet(request.out, aggregates)
    say("drawing charts")
    charts = draw_charts(request.out, aggregates) if aggregates.summary else []
    return write_html(request.out, request, aggregates, charts, files)
